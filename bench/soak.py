"""Soak: a million persistent messages through one master and its dedupe window; RSS as it goes.

Starts a primacy group (default settings: a 100 000-id dedupe window, built-in
STOMP) and, where Debian's ActiveMQ 5.17 is installed, an ActiveMQ
shared-file pair, one after the other on this machine. Against each: producer
processes (stomp.py, a RECEIPT awaited per 1 KiB persistent message, every
message id new, so every one passes through the dedupe window) send
``--messages`` in all, while one consumer process counts at most
``--consumer-rate`` per second of what it receives and acknowledges each message
after counting it (``ack:client-individual``, prefetch 100: nothing acknowledged
is left unread by a failover, which ``ack:auto`` did not promise). While the
producers send slower than that rate no backlog builds in the broker: primacy's
master holds at most the prefetch unacknowledged (its lines say how many), and
what its memory carries is the per-id state of the window. Faster, the backlog
waits in the broker (before, with ``ack:auto``, it waited in the consumer's
process): its lines show it.
The master's RSS (its whole process tree, psutil) is printed every
``--every`` messages, with its ratio to the figure after 200 000 (the issue's
"flat": at most 1.1) and primacy's ratio to ActiveMQ's at the same count, and the
p99 and the max RECEIPT latency (SEND written to RECEIPT read, in each producer) of
the messages receipted since the last mark: a rebuild in the commit path shows as a
max far above its p99. Each producer writes its latencies into shared memory, read
at the marks (the cost per message: a clock read and a store).
primacy's lines also carry what its master says it holds (/status: messages
unacknowledged, bodies in memory). ``--probe DIR`` loads bench/memory_probe into
primacy's nodes and has the master write its memory's make-up at every mark
(``--trace``: with tracemalloc snapshots; slow); ``bench/memory_probe/compare.py
DIR`` tells what grew between marks. Asserts nothing; every process started is
killed by pid on exit.

    .venv/bin/python bench/soak.py                       # 1 000 000 messages, ~25 min per broker
    .venv/bin/python bench/soak.py --messages 300000 --every 50000 --no-activemq
    .venv/bin/python bench/soak.py --no-activemq --probe /tmp/probe --trace
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import multiprocessing
import os
import platform
import queue
import signal
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import stomp

from bench.activemq.brokers import ActiveMQPair, HaGroup, PrimacyGroup, tree_rss_bytes
from bench.activemq.config import TUNED, missing_activemq
from bench.activemq.receipts import ReceiptListener
from bench.activemq.workload import (
    BODY,
    Address,
    acknowledge,
    connection_to,
    receipted_headers,
    subscribe_acknowledging,
)

QUEUE = "/queue/soak"
FLAT_FROM = 200_000  # the reference point: RSS after this many messages
SETTLE_S = 5.0
PROBE = Path(__file__).resolve().parent / "memory_probe"


def timed_producer(
    address: Address, tag: str, stop: Any, counts: Any, slot: int, latencies: Any
) -> None:
    """One producer process (``workload.producer_loop``'s, timed): send until stopped,
    awaiting each RECEIPT; ``latencies[n]`` the n-th round trip in µs, written before
    ``counts[slot]`` says it is there (beyond the array's end only counted)."""
    listener = ReceiptListener()
    connection = connection_to(address)
    connection.set_listener("bench", listener)
    connection.connect(wait=True)
    capacity = len(latencies)
    number = 0
    while not stop.is_set():
        number += 1
        bench_id = f"{tag}-{slot}-{number}"
        sent_ns = time.perf_counter_ns()
        connection.send(QUEUE, BODY, headers=receipted_headers(bench_id))
        if not listener.receipts.acquire(timeout=30):
            raise RuntimeError(f"no receipt from {address} within 30 s")
        elapsed_us = (time.perf_counter_ns() - sent_ns) // 1000
        if listener.errors:
            raise RuntimeError(f"ERROR from {address}: {listener.errors[0]}")
        if number <= capacity:
            latencies[number - 1] = min(elapsed_us, 2**32 - 1)
        counts[slot] += 1
    connection.disconnect()


def latency_since(latencies: list[Any], read: list[int], counts: Any) -> tuple[float, float, int]:
    """p99 and max (ms) of the round trips receipted since ``read`` (each producer's count
    at the last mark), and how many; moves ``read`` on."""
    taken: list[int] = []
    for slot, array in enumerate(latencies):
        upto = min(counts[slot], len(array))
        taken.extend(array[read[slot] : upto])
        read[slot] = upto
    if not taken:
        return 0.0, 0.0, 0
    taken.sort()
    p99 = taken[min(len(taken) - 1, int(len(taken) * 0.99))]
    return p99 / 1000, taken[-1] / 1000, len(taken)


def counting_consumer(address: Address, rate: float, stop: Any, consumed: Any) -> None:
    """One consumer process: counts at most ``rate`` messages a second, acknowledging each
    after counting it (``subscribe_acknowledging``: at-least-once across a failover, where
    ``ack:auto`` lost what the cut connection carried)."""
    received: queue.SimpleQueue[str] = queue.SimpleQueue()  # ack ids, in arrival order

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            received.put(frame.headers["ack"])

    connection = connection_to(address)
    connection.set_listener("soak", Listener())
    connection.connect(wait=True)
    # Up to ``prefetch`` messages unacknowledged: the lag is in this process, as before,
    # and the broker holds at most that many for it.
    subscribe_acknowledging(connection, QUEUE, "soak", prefetch=100)
    started = time.monotonic()
    while not stop.is_set():
        try:
            ack_id = received.get(timeout=0.5)
        except queue.Empty:
            continue
        consumed.value += 1
        acknowledge(connection, ack_id)
        ahead = consumed.value / rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    connection.disconnect()


def held_by_master(group: HaGroup) -> str:
    """What a primacy master says it holds; nothing for ActiveMQ."""
    if not isinstance(group, PrimacyGroup):
        return ""
    port = group.wait_for_a_master().port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10) as answer:
        broker = json.load(answer)["broker"]
    return (
        f", {broker['messages_unacknowledged']:>7,} unacknowledged, "
        f"bodies {broker['body_memory_bytes'] / 2**20:4.0f} MiB"
    )


def probe_memory(pid: int, directory: Path, mark: int) -> None:
    """Have the probed master write its memory's make-up; wait until it has."""
    written = set(directory.glob(f"{pid}-*.json"))
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + 300  # a tracemalloc snapshot of a big heap takes a while
    while time.monotonic() < deadline:
        new = set(directory.glob(f"{pid}-*.json")) - written
        if new:
            (directory / f"mark-{mark}").write_text(new.pop().stem)
            return
        time.sleep(0.2)
    raise RuntimeError(f"the memory probe of {pid} wrote nothing in 300 s")


Figures = dict[int, tuple[int, float, float]]  # mark: (RSS bytes, p99 ms, max ms)


def soak(group: HaGroup, label: str, args: argparse.Namespace) -> Figures:
    """RSS of the master's process tree after every ``args.every`` receipted messages, and
    the RECEIPT latency's p99 and max of the messages since the mark before."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()  # the consumer's
    producers_stop = context.Event()
    counts = context.Array("q", args.producers, lock=False)
    consumed = context.Value("q", 0, lock=False)
    address = group.master_address()
    master = group.master_pid()
    # Room for every message in each producer's array: their shares are not known ahead.
    latencies = [context.RawArray("I", args.messages) for _ in range(args.producers)]
    read = [0] * args.producers
    processes = [
        context.Process(
            target=timed_producer,
            args=(address, f"soak-{label}", producers_stop, counts, slot, latencies[slot]),
        )
        for slot in range(args.producers)
    ]
    processes.append(
        context.Process(
            target=counting_consumer, args=(address, args.consumer_rate, stop, consumed)
        )
    )
    figures: Figures = {0: (tree_rss_bytes(master), 0.0, 0.0)}
    print(f"{label}: RSS at start {figures[0][0] / 2**20:.0f} MiB", flush=True)
    started = time.monotonic()
    try:
        for process in processes:
            process.start()
        mark = args.every
        while mark <= args.messages:
            sent = sum(counts)
            if sent >= mark:
                rss = tree_rss_bytes(master)
                p99, worst, timed = latency_since(latencies, read, counts)
                figures[mark] = (rss, p99, worst)
                elapsed = time.monotonic() - started
                print(
                    f"{label}: {mark:>9,} sent, {consumed.value:>9,} consumed, "
                    f"RSS {rss / 2**20:6.0f} MiB, {sent / elapsed:6.0f} msg/s, "
                    f"RECEIPT p99 {p99:6.2f} max {worst:7.2f} ms ({timed:,} since the last "
                    f"mark), load {os.getloadavg()[0]:.1f}{held_by_master(group)}",
                    flush=True,
                )
                if args.probe and isinstance(group, PrimacyGroup):
                    probe_memory(master, args.probe, mark)
                mark += args.every
            elif not all(p.is_alive() for p in processes):
                raise RuntimeError(f"a client process against {label} died")
            else:
                time.sleep(0.2)
        # The sample at the last mark is taken while messages are still being receipted; one
        # taken once the producers have stopped and the master is idle (its idle checkpoint
        # written) tells a transient there from growth.
        producers_stop.set()
        time.sleep(SETTLE_S)
        print(
            f"{label}: RSS {SETTLE_S:.0f} s after the last message: "
            f"{tree_rss_bytes(master) / 2**20:.0f} MiB",
            flush=True,
        )
    finally:
        producers_stop.set()
        stop.set()
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join(10)
    return figures


def report(figures: dict[str, Figures]) -> None:
    print()
    labels = list(figures)
    print(
        "| messages | "
        + " | ".join(f"{label} RSS (MiB) | {label} RECEIPT p99 / max (ms)" for label in labels)
        + " | RSS ratio |"
    )
    print("| --- |" + " --- | --- |" * len(labels) + " --- |")
    for mark in sorted(figures[labels[0]]):
        cells = []
        for label in labels:
            rss, p99, worst = figures[label].get(mark, (0, 0.0, 0.0))
            cells += [f"{rss / 2**20:.0f}", f"{p99:.2f} / {worst:.2f}" if mark else ""]
        ratio = ""
        if len(labels) == 2 and figures[labels[1]].get(mark):
            ratio = f"{figures[labels[0]][mark][0] / figures[labels[1]][mark][0]:.2f}"
        print(f"| {mark:,} | " + " | ".join(cells) + f" | {ratio} |")
    for label, marks in figures.items():
        last = max(marks)
        if FLAT_FROM in marks and last > FLAT_FROM:
            print(
                f"{label}: RSS after {last:,} / after {FLAT_FROM:,}: "
                f"{marks[last][0] / marks[FLAT_FROM][0]:.2f} (target <= 1.1)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--every", type=int, default=100_000, help="print RSS this often")
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument(
        "--consumer-rate",
        type=float,
        default=1000.0,
        help="messages per second the consumer counts and acknowledges (100 read ahead)",
    )
    parser.add_argument("--no-activemq", action="store_true", help="primacy only")
    parser.add_argument(
        "--probe",
        type=Path,
        metavar="DIR",
        help="primacy's master writes its memory's make-up into DIR at every mark "
        "(read it with bench/memory_probe/compare.py DIR)",
    )
    parser.add_argument(
        "--trace", action="store_true", help="with --probe: tracemalloc snapshots too (slow)"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        help="run in DIR (a new directory, kept: the nodes' logs) not a temp one",
    )
    args = parser.parse_args()
    if args.trace and not args.probe:
        parser.error("--trace needs --probe DIR")
    env = None
    if args.probe:
        args.probe.mkdir(parents=True, exist_ok=True)
        env = {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(PROBE), os.environ.get("PYTHONPATH")])),
            "PRIMACY_MEMORY_PROBE": str(args.probe.resolve()),
            "PRIMACY_MEMORY_PROBE_TRACE": "1" if args.trace else "0",
        }
    print(
        f"soak: {args.messages:,} messages, {args.producers} producers, consumer at most "
        f"{args.consumer_rate:.0f}/s; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
        f"{platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    figures: dict[str, Figures] = {}
    with contextlib.ExitStack() as kept:
        root = (
            str(args.dir)
            if args.dir
            else kept.enter_context(tempfile.TemporaryDirectory(prefix="primacy-soak-"))
        )
        primacy = PrimacyGroup(Path(root) / "primacy", nodes=2, env=env)
        try:
            primacy.start()
            figures["primacy"] = soak(primacy, "primacy", args)
        finally:
            primacy.close()
        reason = missing_activemq()
        if args.no_activemq or reason is not None:
            print(f"ActiveMQ skipped: {reason or '--no-activemq'}")
        else:
            pair = ActiveMQPair(Path(root) / "activemq", TUNED)
            try:
                pair.start()
                figures["ActiveMQ"] = soak(pair, "ActiveMQ", args)
            finally:
                pair.close()
    report(figures)


if __name__ == "__main__":
    main()
