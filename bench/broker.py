"""Broker benchmark: persistent throughput with stomp.py, each send waiting for its RECEIPT.

Run: ``.venv/bin/python bench/broker.py [--dir DIR] [--seconds S] [--policy sync]``.
Starts a BrokerService over a JournalStore on a temporary share (a real lease
and epoch, so every group commit runs the real fencing check), then measures
1 producer and 8 concurrent producers (each its own process with one stomp.py
1.2 connection) sending 1 KiB messages to one queue, waiting for the receipt
of each before the next. Prints figures; asserts nothing.

``measure_kill_to_first_receipt`` is the failover figure; it needs a group of
supervisors serving STOMP and is called from the supervisor's benchmark.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import stomp

from primacy.broker.service import BrokerService
from primacy.cli.localgroup import Group, free_port, wait_until
from primacy.client.producer import Producer
from primacy.locker.lease import Lease
from primacy.share.posix import PosixShare
from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore

BODY = "p" * 1024


def producer_loop(address: tuple[str, int], stop: Any, counts: Any, slot: int) -> None:
    """Send until stopped, one receipt awaited per message; counts[slot] = receipts."""
    receipts = threading.Semaphore(0)

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_receipt(self, frame: object) -> None:
            receipts.release()

    connection = stomp.Connection12([address])
    connection.set_listener("bench", Listener())
    connection.connect(wait=True)
    run = uuid.uuid4().hex[:12]  # ids unique per run: a repeat would be dropped as a resend
    number = 0
    while not stop.is_set():
        number += 1
        connection.send(
            "/queue/bench",
            BODY,
            headers={"receipt": f"{slot}-{number}", "message-id": f"{run}-p{slot}-{number}"},
        )
        if not receipts.acquire(timeout=30):
            raise RuntimeError("no receipt within 30 s")
        counts[slot] += 1
    connection.disconnect()


def throughput(address: tuple[str, int], producers: int, seconds: float) -> float:
    """Receipted messages per second over ``seconds`` with ``producers`` connections.

    Producers run in their own processes, as real clients would, so they do not
    compete with the broker for its interpreter lock.
    """
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    counts = context.Array("q", producers, lock=False)
    processes = [
        context.Process(target=producer_loop, args=(address, stop, counts, slot))
        for slot in range(producers)
    ]
    for process in processes:
        process.start()
    time.sleep(2.0)  # start, connect and warm up
    start_count, start = sum(counts), time.monotonic()
    time.sleep(seconds)
    done, elapsed = sum(counts) - start_count, time.monotonic() - start
    stop.set()
    for process in processes:
        process.join(30)
    return done / elapsed


def measure_kill_to_first_receipt(
    stomp_addresses: list[tuple[str, int]], kill_master: Callable[[], None]
) -> float:
    """Seconds from ``kill_master()`` to the first RECEIPT from the node that takes over.

    ``stomp_addresses`` are every node's STOMP HOST:PORT; ``kill_master`` must
    SIGKILL the current master's supervisor (the caller knows which one). The
    producer uses our failover client with short reconnect delays, as a
    latency-sensitive client would.
    """
    listed = ",".join(f"tcp://{host}:{port}" for host, port in stomp_addresses)
    url = f"failover:({listed})?initialReconnectDelay=10&maxReconnectDelay=100&randomize=false"
    producer = Producer(url, window=1, receipt_timeout_s=5.0)
    try:
        producer.send("/queue/failover-bench", b"before")
        kill_master()
        killed_at = time.monotonic()
        producer.send("/queue/failover-bench", b"after")  # returns once receipted
        return time.monotonic() - killed_at
    finally:
        producer.close()


def failover_figures(kills: int, root: Path) -> list[float]:
    """kill -9 of the master -> first RECEIPT, over ``kills`` takeovers of a 3-node group."""
    share = root / "group-share"
    share.mkdir()
    group = Group(share=share, log_dir=root)
    stomp_ports = {f"n{i}": free_port() for i in (1, 2, 3)}
    samples = []
    try:
        for node_id, port in stomp_ports.items():
            group.start(node_id, "--stomp", f"127.0.0.1:{port}")
        addresses = [("127.0.0.1", port) for port in stomp_ports.values()]
        for _ in range(kills):
            wait_until(
                lambda: sum(n.status("/health") == 200 for n in group.alive()) >= 3,
                60,
                "three running nodes",
            )
            master = group.wait_for_master(timeout_s=30)
            samples.append(
                measure_kill_to_first_receipt(
                    addresses, lambda master=master: master.signal(signal.SIGKILL)
                )
            )
            master.process.wait(10)
            group.start(master.node_id, "--stomp", f"127.0.0.1:{stomp_ports[master.node_id]}")
    finally:
        group.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", type=Path, help="where to make the temporary share")
    parser.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    parser.add_argument("--policy", choices=[p.value for p in SyncPolicy], default="sync")
    parser.add_argument(
        "--producers",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 8],
        help="comma-separated producer counts to measure (default 1,8)",
    )
    parser.add_argument(
        "--failovers",
        type=int,
        default=20,
        help="kill -9 -> first RECEIPT measurements on a 3-node group (default 20)",
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="primacy-bench-broker-", dir=args.dir))
    try:
        share = root / "share"
        share.mkdir()
        lease = Lease(PosixShare(share), "bench")
        assert lease.try_acquire()
        epoch = lease.claim_epoch()
        config = StoreConfig(share=share, node_id="bench", sync_policy=SyncPolicy(args.policy))
        store = JournalStore.open(config, epoch=epoch, fencing_check=lease.revalidate)
        service = BrokerService(store, "127.0.0.1", 0)
        service.start()
        print(f"python {platform.python_version()}, {os.cpu_count()} cores, share {share}")
        print(f"policy {args.policy}, 1 KiB bodies, receipt awaited per message, stomp.py 1.2")
        for producers in args.producers:
            rate = throughput(service.address, producers, args.seconds)
            print(f"{producers} producer(s): {rate:,.0f} messages/s")
        stats = store.stats()
        per_batch = stats.records_written / max(1, stats.batches_written)
        print(
            f"journal: {stats.records_written} records in {stats.batches_written} batches "
            f"({per_batch:.1f} per batch)"
        )
        service.stop()
        store.close()
        lease.release()
        if args.failovers:
            samples = failover_figures(args.failovers, root)
            print(
                f"kill -9 of the master -> first RECEIPT (3 nodes, defaults, n={len(samples)}): "
                f"min {min(samples) * 1000:.0f} ms, median {statistics.median(samples) * 1000:.0f}"
                f" ms, max {max(samples) * 1000:.0f} ms"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
