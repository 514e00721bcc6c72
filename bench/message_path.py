"""Where a receipted message's time goes: each hand-off of one producer's round trip, and the
CPU a real node spends per message.

Run: ``.venv/bin/python bench/message_path.py [--seconds S] [--dir DIR]``.

1. The round trip, one stomp.py producer (its own process) awaiting each RECEIPT
   from a BrokerService over a JournalStore with a real lease, as ``bench/broker.py``
   runs it. The broker's methods at each hand-off are wrapped here to take a
   timestamp (this script's instrumentation, not the product's), and the median of
   each stage is printed: the client (RECEIPT written to the next SEND read),
   parsing and submitting, the hand-off to the writer thread, the commit (with its
   fdatasync and lease check), the hand-off back, and settling and writing the
   RECEIPT.
   From the same stages, the physical limit for one producer (issue 30): a round trip
   of nothing but the client's share and one fdatasync, in messages per second.
2. A real node (``primacy run``, as the comparison with ActiveMQ starts it): messages
   per second with 1 and 8 producers, and the node's user and system CPU per message;
   the one producer's rate as a fraction of the limit measured in step 1.
   Both sides share the machine's cores, so CPU per message bounds the rate.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.activemq.brokers import PrimacyGroup
from bench.activemq.workload import throughput
from bench.broker import throughput as in_process_throughput
from primacy.broker.connection import StompConnection
from primacy.broker.journal_waits import JournalWaits
from primacy.broker.service import BrokerService
from primacy.locker.lease import Lease
from primacy.share.posix import PosixShare
from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore
from primacy.store.writer import GroupCommitWriter, SegmentFile

Marks = defaultdict[str, list[float]]


def mark_calls(
    marks: Marks, owner: type, method: str, *, before: str = "", after: str = ""
) -> None:
    """Wrap ``owner.method`` to note perf_counter() before and/or after each call."""
    original = getattr(owner, method)

    @functools.wraps(original)
    def marked(*args: Any, **kwargs: Any) -> Any:
        if before:
            marks[before].append(time.perf_counter())
        try:
            return original(*args, **kwargs)
        finally:
            if after:
                marks[after].append(time.perf_counter())

    setattr(owner, method, marked)


def timed(marks: Marks, name: str, call: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        started = time.perf_counter()
        call()
        marks[name].append(time.perf_counter() - started)

    return run


def median_gap_us(starts: list[float], ends: list[float]) -> float:
    """Median time from each start to the first end after it (the ends of one stream)."""
    gaps = []
    for start in starts[50:-50]:  # away from the start-up and the stop
        index = bisect.bisect_right(ends, start)
        if index < len(ends):
            gaps.append(ends[index] - start)
    return statistics.median(gaps) * 1e6


def round_trip(root: Path, seconds: float) -> float:
    """Print the round trip's stages; returns the physical limit for one producer (msg/s):
    one round trip of nothing but the client's share and one ``fdatasync``, as measured."""
    marks: Marks = defaultdict(list)
    mark_calls(marks, StompConnection, "buffer_updated", before="read")
    mark_calls(marks, GroupCommitWriter, "submit", after="submitted")
    mark_calls(marks, GroupCommitWriter, "_commit", before="commit", after="committed")
    mark_calls(marks, JournalWaits, "_drain", before="woken")
    mark_calls(marks, StompConnection, "_send_frame", after="replied")
    sync = SegmentFile.sync
    SegmentFile.sync = lambda self: timed(marks, "sync s", lambda: sync(self))()  # type: ignore[method-assign]
    share = root / "share"
    share.mkdir()
    lease = Lease(PosixShare(share), "bench")
    assert lease.try_acquire()
    epoch = lease.claim_epoch()
    config = StoreConfig(share=share, node_id="bench", sync_policy=SyncPolicy.SYNC)
    store = JournalStore.open(
        config, epoch=epoch, fencing_check=timed(marks, "lease check s", lease.revalidate)
    )
    service = BrokerService(store, "127.0.0.1", 0)
    service.start()
    try:
        for stream in marks.values():
            stream.clear()
        rate = in_process_throughput(service.address, 1, seconds)
    finally:
        service.stop()
        store.close()
        lease.release()
        SegmentFile.sync = sync  # type: ignore[method-assign]
    stages = [
        ("the client: RECEIPT written -> next SEND read", "replied", "read"),
        ("SEND read -> record submitted", "read", "submitted"),
        ("submitted -> writer starts the commit (hand-off)", "submitted", "commit"),
        ("the commit: encode, write, fdatasync, lease check", "commit", "committed"),
        ("committed -> loop woken (hand-off)", "committed", "woken"),
        ("loop woken -> RECEIPT written", "woken", "replied"),
    ]
    print(f"round trip, 1 producer, policy sync: {rate:,.0f} msg/s, {1e6 / rate:.0f} us each")
    medians = {label: median_gap_us(marks[start], marks[end]) for label, start, end in stages}
    for label, median in medians.items():
        print(f"  {label}: {median:.0f} us (median)")
    for name in ("sync s", "lease check s"):
        print(f"    of the commit, {name[:-2]}: {statistics.median(marks[name]) * 1e6:.0f} us")
    client_us = medians[stages[0][0]]
    sync_us = statistics.median(marks["sync s"]) * 1e6
    limit = 1e6 / (client_us + sync_us)
    print(
        f"physical limit for one producer (the client's share {client_us:.0f} us + one "
        f"fdatasync {sync_us:.0f} us): {limit:,.0f} msg/s"
    )
    return limit


def measure_node(
    root: Path, seconds: float, env: dict[str, str] | None = None
) -> dict[int, tuple[float, float, float]]:
    """A real node's rate and its user and system CPU per message (µs), by producer count;
    ``env`` is added to the node's environment (not the producers').

    The CPU counted covers the producers' start-up too: per message, an upper bound."""
    group = PrimacyGroup(root / f"node-{time.monotonic_ns()}", nodes=1, env=env)
    group.start()
    try:
        address = group.master_address()
        node = psutil.Process(group.master_pid())
        throughput(address, "/queue/warm-up", "w", 8, 3)
        figures = {}
        for producers in (1, 8):
            before = node.cpu_times()
            queue, tag = f"/queue/p{producers}", f"p{producers}"
            rate = throughput(address, queue, tag, producers, seconds, warmup_s=0)
            after = node.cpu_times()
            messages = rate * seconds
            figures[producers] = (
                rate,
                (after.user - before.user) / messages * 1e6,
                (after.system - before.system) / messages * 1e6,
            )
        return figures
    finally:
        group.close()


def node_figures(root: Path, seconds: float, env: dict[str, str] | None = None) -> dict[str, float]:
    """``measure_node``'s figures by name: CPU per message (user + system, µs) and rate."""
    figures = {}
    for producers, (rate, user, system) in measure_node(root, seconds, env).items():
        figures[f"node CPU per message, {producers} producer(s), us"] = user + system
        figures[f"messages per second, {producers} producer(s)"] = rate
    return figures


def node_cpu(root: Path, seconds: float, limit: float) -> None:
    for producers, (rate, user, system) in measure_node(root, seconds).items():
        print(
            f"a real node, {producers} producer(s): {rate:,.0f} msg/s; "
            f"node CPU per message: user {user:.0f} us, system {system:.0f} us (at most; "
            f"messages over {seconds:.0f} s)"
        )
        if producers == 1:
            print(f"  a real node's one producer against the physical limit: {rate / limit:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where to make the temporary share")
    parser.add_argument("--seconds", type=float, default=8.0, help="per measurement")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="primacy-bench-path-", dir=args.dir))
    try:
        print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
        limit = round_trip(root, args.seconds)
        node_cpu(root, args.seconds, limit)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
