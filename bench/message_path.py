"""Where a receipted message's time goes: each hand-off of one producer's round trip, and the
CPU a real node spends per message.

Run: ``.venv/bin/python bench/message_path.py [--seconds S] [--rounds N] [--no-node]``.

1. The round trip's budget (issue 49), one stomp.py producer (its own process) awaiting
   each RECEIPT from a BrokerService over a JournalStore with a real lease, on uvloop and
   on asyncio, with a lone commit made on the loop's thread (inline, the default) and
   handed to the writer thread (issue 30's path), the four alternating ``--rounds``
   times. The broker's methods at each hand-off are wrapped here to take a timestamp
   (this script's instrumentation, not the product's); each stage's mean (means add up)
   is printed: the client's share (RECEIPT written to the next SEND read), parse, the
   broker core (its journal encode apart), the hand-off to the commit, the commit (its
   batch encode, fdatasync and fencing check apart), the hand-back and the RECEIPT write.
   Beside them, each way's physical limit (issue 30): a round trip of nothing but its
   client's share and its one fdatasync, in messages per second; and the broker loop
   thread's CPU per message and how often per message the kernel moved it to another CPU
   (/proc's ``se.nr_migrations``): with the client on the same machine, where the
   scheduler puts the loop thread changes its CPU per message by a third.
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
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.activemq.brokers import PrimacyGroup
from bench.activemq.workload import throughput
from primacy.broker.config import BrokerConfig
from primacy.broker.connection import StompConnection
from primacy.broker.service import BrokerService
from primacy.locker.lease import Lease
from primacy.share.posix import PosixShare
from primacy.store import format as fmt
from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore
from primacy.store.writer import GroupCommitWriter, SegmentFile

Marks = defaultdict[str, list[float]]

INLINE_QUIET_S = StoreConfig.model_fields["inline_commit_quiet_s"].default  # the product's


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
    return statistics.fmean(gaps) * 1e6 if gaps else math.nan  # nan: a mark inside compiled code


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
    wrap(GroupCommitWriter, "submit_many", after="submitted")
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


def loop_thread_counters() -> tuple[float, int]:
    """The broker loop thread's CPU time (s) and how often the kernel moved it to another CPU,
    from /proc (``se.sum_exec_runtime``, ``se.nr_migrations``): its thread is found by name."""
    (tid,) = [t.native_id for t in threading.enumerate() if t.name == "primacy-broker"]
    fields = {}
    for line in Path(f"/proc/self/task/{tid}/sched").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    return float(fields["se.sum_exec_runtime"]) / 1e3, int(fields["se.nr_migrations"])


def round_trip(root: Path, seconds: float, *, inline: bool, loop: str) -> dict[str, float]:
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
        # The default (store/config.py) against issue 30's path, every commit handed off.
        inline_commit_quiet_s=INLINE_QUIET_S if inline else None,
    )
    store = JournalStore.open(
        config, epoch=epoch, fencing_check=timed(marks, "lease check s", lease.revalidate)
    )
    service = BrokerService(store, "127.0.0.1", 0, BrokerConfig(stomp_event_loop=loop))
    service.start()
    try:
        for stream in marks.values():
            stream.clear()
        writer = store._writer
        assert writer is not None
        cpu_before, moved_before = loop_thread_counters()
        records_before = writer.records_written
        # Counted once the producer sends (spawning it takes seconds on a loaded machine).
        rate = throughput(service.address, "/queue/path", "path", 1, seconds, warmup_s=1.0)
        cpu_after, moved_after = loop_thread_counters()
        records = max(writer.records_written - records_before, 1)  # with the warm-up's
        loop_cpu_us = (cpu_after - cpu_before) / records * 1e6
        migrations = (moved_after - moved_before) / records
        inline_share = writer.inline_commits / max(writer.batches_written, 1)
        figures = stage_means(marks)  # the one producer's, before the eight come
        # Then eight at once on the same service: group commit, with or without inline.
        inline_before, batches_before = writer.inline_commits, writer.batches_written
        rate8 = throughput(service.address, "/queue/path8", "path8", 8, seconds, warmup_s=1.0)
        inline8 = (writer.inline_commits - inline_before) / max(
            writer.batches_written - batches_before, 1
        )
    finally:
        service.stop()
        store.close()
        lease.release()
        undo()
    figures["rate"] = rate
    figures["inline share"] = inline_share
    figures["loop cpu"], figures["migrations"] = loop_cpu_us, migrations
    figures["rate 8"], figures["inline share 8"] = rate8, inline8
    client_us = figures[STAGES[0][0]]
    figures["limit"] = 1e6 / (client_us + figures["  of the commit, fdatasync"])
    return figures


def stage_means(marks: Marks) -> dict[str, float]:
    figures = {label: mean_gap_us(marks[start], marks[end]) for label, start, end in STAGES}
    for label, mark in DURATIONS:
        kept = marks[mark][50:-50]
        figures[label] = statistics.fmean(kept) * 1e6 if kept else math.nan
    return figures


def budget(
    root: Path, seconds: float, rounds: int, loops: tuple[str, ...] = ("uvloop", "asyncio")
) -> float:
    """Print the round trip's budget on each loop, inline and handed off, alternating
    ``rounds`` times (medians of the rounds); returns the physical limit (msg/s)."""
    ways = [(loop, inline) for loop in loops for inline in (True, False)]
    runs: dict[tuple[str, bool], list[dict[str, float]]] = {way: [] for way in ways}
    for _ in range(rounds):
        for loop, inline in ways:
            runs[loop, inline].append(round_trip(root, seconds, inline=inline, loop=loop))

    def med(way: tuple[str, bool], key: str) -> float:
        return statistics.median(run[key] for run in runs[way])

    def row(label: str, values: list[str]) -> None:
        print(f"  {label:<60}" + "".join(f" {value:>17}" for value in values))

    def us(value: float) -> str:
        # A stage whose marks are inside compiled code was not seen (no mean to print).
        return "(compiled)" if math.isnan(value) else f"{value:.0f}"

    print(f"round trip, 1 producer, policy sync, median of {rounds} round(s) each, alternating")
    row(
        "stage (mean, us)",
        [f"{loop}/{'inline' if inline else 'hand-off'}" for loop, inline in ways],
    )
    labels = [label for label, _, _ in STAGES]
    labels.insert(3, DURATIONS[0][0])
    labels[labels.index(STAGES[4][0]) + 1 : labels.index(STAGES[4][0]) + 1] = [
        label for label, _ in DURATIONS[1:]
    ]
    for label in labels:
        row(label, [us(med(way, label)) for way in ways])
    sums = [sum(med(way, label) for label, _, _ in STAGES) for way in ways]
    row("sum of the stages", [us(total) for total in sums])
    rates = [med(way, "rate") for way in ways]
    row("measured: us per round trip (1e6 / rate)", [f"{1e6 / rate:.0f}" for rate in rates])
    row("messages per second", [f"{rate:,.0f}" for rate in rates])
    row("commits made on the loop thread", [f"{med(way, 'inline share'):.0%}" for way in ways])
    row("the loop thread's CPU per message, us", [us(med(way, "loop cpu")) for way in ways])
    row(
        "the loop thread moved to another CPU, per message",
        [f"{med(way, 'migrations'):.2f}" for way in ways],
    )
    row(
        "8 producers, same service: messages per second", [f"{med(w, 'rate 8'):,.0f}" for w in ways]
    )
    row(
        "8 producers: commits made on the loop thread",
        [f"{med(w, 'inline share 8'):.0%}" for w in ways],
    )
    limits = [med(way, "limit") for way in ways]
    row("physical limit: 1e6 / (its client's share + its fdatasync)", [f"{x:,.0f}" for x in limits])
    row("fraction of its limit", [f"{rate / x:.2f}" for rate, x in zip(rates, limits, strict=True)])
    if ("asyncio", False) in ways:
        base = rates[ways.index(("asyncio", False))]
        row("rate / asyncio handed off (issue 30's path)", [f"{r / base:.2f}" for r in rates])
    limit = limits[0]  # the default's: uvloop, inline
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
        rss = node.memory_info().rss
        time.sleep(6)  # quiet: the broker's heap trim comes 2-4 s after the last message
        print(
            f"node RSS after the rounds {rss / 2**20:.0f} MiB, 6 s later (after the quiet "
            f"spell's malloc_trim) {node.memory_info().rss / 2**20:.0f} MiB"
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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", type=Path, help="where to make the temporary share")
    parser.add_argument("--seconds", type=float, default=8.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="of the round trip, each way")
    parser.add_argument("--no-node", action="store_true", help="the round trip's budget only")
    parser.add_argument("--loops", default="uvloop,asyncio", help="the loops of the budget")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="primacy-bench-path-", dir=args.dir))
    try:
        print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
        limit = budget(root, args.seconds, args.rounds, tuple(args.loops.split(",")))
        if not args.no_node:
            node_cpu(root, args.seconds, limit)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
