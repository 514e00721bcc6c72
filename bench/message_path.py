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
from primacy.broker.service import BrokerService
from primacy.locker.lease import Lease
from primacy.share.posix import PosixShare
from primacy.store import format as fmt
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


def mean_gap_us(starts: list[float], ends: list[float]) -> float:
    """Mean time from each start to the first end after it (the ends of one stream): means,
    not medians, so that the stages of a round trip add up to it (its tail included)."""
    gaps = []
    for start in starts[50:-50]:  # away from the start-up and the stop
        index = bisect.bisect_right(ends, start)
        if index < len(ends):
            gaps.append(ends[index] - start)
    return statistics.fmean(gaps) * 1e6


STAGES = [
    # (label, from mark, to mark): the median time from each "from" to the next "to".
    ("the client: RECEIPT written -> next SEND read", "replied", "read"),
    ("parse: SEND read -> its frame handled", "read", "handled"),
    ("broker core: frame handled -> record submitted", "handled", "submitted"),
    ("hand-off: submitted -> the commit starts", "submitted", "commit"),
    ("the commit: encode, write, fdatasync, fencing check, apply", "commit", "committed"),
    ("hand-back: committed -> RECEIPT write starts", "committed", "replying"),
    ("RECEIPT write", "replying", "replied"),
]
DURATIONS = [  # (label, mark of durations in seconds)
    ("  of the core, journal encode (encode_send)", "encode_send s"),
    ("  of the commit, journal encode (encode_batch)", "encode_batch s"),
    ("  of the commit, fdatasync", "sync s"),
    ("  of the commit, fencing check (lease revalidate)", "lease check s"),
]


def instrument(marks: Marks) -> Callable[[], None]:
    """Wrap the methods at each hand-off to note their times; returns the undo."""
    undo: list[Callable[[], None]] = []

    def wrap(owner: Any, name: str, **where: str) -> None:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        undo.append(lambda: setattr(owner, name, original))
        mark_calls(marks, owner, name, **where)

    def duration(owner: Any, name: str, mark: str) -> None:
        original = getattr(owner, name)
        undo.append(lambda: setattr(owner, name, original))

        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                marks[mark].append(time.perf_counter() - started)

        setattr(owner, name, run)

    wrap(StompConnection, "buffer_updated", before="read")
    StompConnection.handle = StompConnection.handle  # type: ignore[method-assign]  # a mixin's
    wrap(StompConnection, "handle", before="handled")
    wrap(GroupCommitWriter, "submit", after="submitted")
    wrap(GroupCommitWriter, "_commit", before="commit", after="committed")
    wrap(StompConnection, "_send_frame", before="replying", after="replied")
    duration(JournalStore, "encode_send", "encode_send s")
    duration(fmt, "encode_batch", "encode_batch s")
    duration(SegmentFile, "sync", "sync s")

    def undo_all() -> None:
        for step in reversed(undo):
            step()
        delattr(StompConnection, "handle")

    return undo_all


def round_trip(root: Path, seconds: float, *, inline: bool) -> dict[str, float]:
    """One stomp.py producer's round trip, stage by stage (medians, µs), with the journal
    committing a lone record on the loop's thread (``inline``) or handing every one to the
    writer thread. Also "rate" (msg/s) and "limit": one round trip of nothing but the
    client's share and one ``fdatasync``, in messages per second."""
    marks: Marks = defaultdict(list)
    undo = instrument(marks)
    share = root / f"share-{time.monotonic_ns()}"
    share.mkdir()
    lease = Lease(PosixShare(share), "bench")
    assert lease.try_acquire()
    epoch = lease.claim_epoch()
    config = StoreConfig(
        share=share,
        node_id="bench",
        sync_policy=SyncPolicy.SYNC,
        inline_commit_quiet_s=StoreConfig.model_fields["inline_commit_quiet_s"].default
        if inline
        else None,
    )
    store = JournalStore.open(
        config, epoch=epoch, fencing_check=timed(marks, "lease check s", lease.revalidate)
    )
    service = BrokerService(store, "127.0.0.1", 0)
    service.start()
    try:
        for stream in marks.values():
            stream.clear()
        rate = in_process_throughput(service.address, 1, seconds)
        writer = store._writer
        inline_share = writer.inline_commits / max(writer.batches_written, 1) if writer else 0
    finally:
        service.stop()
        store.close()
        lease.release()
        undo()
    figures = {label: mean_gap_us(marks[start], marks[end]) for label, start, end in STAGES}
    for label, mark in DURATIONS:
        figures[label] = statistics.fmean(marks[mark][50:-50]) * 1e6
    figures["rate"] = rate
    figures["inline share"] = inline_share
    client_us = figures[STAGES[0][0]]
    figures["limit"] = 1e6 / (client_us + figures["  of the commit, fdatasync"])
    return figures


def budget(root: Path, seconds: float, rounds: int) -> float:
    """Print the round trip's budget, inline and handed off, alternating ``rounds`` times
    (medians of the rounds); returns the physical limit for one producer (msg/s)."""
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for _ in range(rounds):
        for inline in (True, False):
            runs[inline].append(round_trip(root, seconds, inline=inline))

    def med(inline: bool, key: str) -> float:
        return statistics.median(run[key] for run in runs[inline])

    print(f"round trip, 1 producer, policy sync, median of {rounds} round(s) each, alternating")
    print(f"  {'stage (mean, us)':<62} {'inline':>8} {'hand-off':>9}")
    total = {True: 0.0, False: 0.0}
    for label, _, _ in STAGES:
        for inline in (True, False):
            total[inline] += med(inline, label)
        print(f"  {label:<62} {med(True, label):>8.0f} {med(False, label):>9.0f}")
        if label.startswith("broker core"):
            label = DURATIONS[0][0]
            print(f"  {label:<62} {med(True, label):>8.0f} {med(False, label):>9.0f}")
        if label.startswith("the commit"):
            for label, _ in DURATIONS[1:]:
                print(f"  {label:<62} {med(True, label):>8.0f} {med(False, label):>9.0f}")
    print(f"  {'sum of the stages':<62} {total[True]:>8.0f} {total[False]:>9.0f}")
    rates = {inline: med(inline, "rate") for inline in (True, False)}
    print(
        f"  {'measured: us per round trip (1e6 / rate)':<62} {1e6 / rates[True]:>8.0f} "
        f"{1e6 / rates[False]:>9.0f}"
    )
    print(f"  {'messages per second':<62} {rates[True]:>8,.0f} {rates[False]:>9,.0f}")
    print(
        f"  {'commits made on the loop thread':<62} {med(True, 'inline share'):>8.0%} "
        f"{med(False, 'inline share'):>9.0%}"
    )
    limit = statistics.median([run["limit"] for run in runs[True] + runs[False]])
    print(
        f"physical limit for one producer (the client's share + one fdatasync): "
        f"{limit:,.0f} msg/s; inline {rates[True] / limit:.2f} of it, hand-off "
        f"{rates[False] / limit:.2f}; inline / hand-off {rates[True] / rates[False]:.2f}"
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
    parser.add_argument("--rounds", type=int, default=3, help="of the round trip, each way")
    parser.add_argument("--no-node", action="store_true", help="the round trip's budget only")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="primacy-bench-path-", dir=args.dir))
    try:
        print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
        limit = budget(root, args.seconds, args.rounds)
        if not args.no_node:
            node_cpu(root, args.seconds, limit)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
