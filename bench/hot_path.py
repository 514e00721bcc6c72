"""The broker's own work per receipted SEND, in one process: no sockets, no client.

Run: ``.venv/bin/python bench/hot_path.py [--messages N] [--policy sync] [--dir DIR]``.

Each of ``--producers`` ``StompConnection`` objects is fed stomp.py's 1 KiB SEND
frames (with a receipt and a message id) through a transport that only looks
for the RECEIPT; each SEND waits for its RECEIPT before the next, as a producer
does. The journal is a
real ``JournalStore`` with a real lease (so every commit runs the real fencing
check); the policy defaults to ``write_no_sync``, so the disk's sync time does not
hide the Python. Prints the rate and the process's CPU per message after a
warm-up of 500 messages.

On a machine shared with others wall-clock figures move with their load;
instruction counts do not. The instructions per message are the difference of
two runs under callgrind, divided by the difference of their message counts::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/hot_path.py --messages 1000   # and 2000

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primacy.broker.config import BrokerConfig
from primacy.broker.connection import Admission, StompConnection
from primacy.broker.core import Broker
from primacy.locker.lease import Lease
from primacy.share.posix import PosixShare
from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore
from tests.harness.recorded_transport import Recorded

WARM_UP = 500
BODY = b"p" * 1024


class ReceiptWatch(Recorded):
    """A transport that keeps nothing and sets ``receipt`` when a RECEIPT is written."""

    def __init__(self) -> None:
        super().__init__()
        self.receipt = asyncio.Event()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if bytes(data[:7]) == b"RECEIPT":
            self.receipt.set()


def send_frame(producer: int, number: int) -> bytes:
    """What stomp.py 9 writes for ``send("/queue/bench", body, headers={receipt, message-id})``."""
    head = (
        f"SEND\ncontent-length:{len(BODY)}\ndestination:/queue/bench\n"
        f"message-id:0123456789ab-p{producer}-{number}\nreceipt:{producer}-{number}\n\n"
    )
    return head.encode() + BODY + b"\x00"


async def producers(store: JournalStore, count: int, messages: int) -> None:
    """``count`` connections, each sending its next SEND once the last one's RECEIPT came."""
    config = BrokerConfig()
    broker = Broker(store, config, asyncio.get_running_loop())
    warm_up = asyncio.Barrier(count + 1)
    measured = asyncio.Barrier(count + 1)

    async def produce(producer: int) -> None:
        transport = ReceiptWatch()
        connection = StompConnection(broker, Admission.of(config))
        connection.connection_made(transport)
        connection.data_received(b"CONNECT\naccept-version:1.2\nhost:bench\n\n\x00")
        frames = [send_frame(producer, n) for n in range((WARM_UP + messages) // count)]
        for number, frame in enumerate(frames):
            if number == WARM_UP // count:
                await warm_up.wait()
            transport.receipt.clear()
            connection.data_received(frame)
            await transport.receipt.wait()
        await measured.wait()

    tasks = [asyncio.create_task(produce(producer)) for producer in range(count)]
    await warm_up.wait()
    started_s, cpu = time.perf_counter(), os.times()
    await measured.wait()
    elapsed_s, used = time.perf_counter() - started_s, os.times()
    await asyncio.gather(*tasks)
    sent = messages // count * count
    user_us = (used.user - cpu.user) / sent * 1e6
    system_us = (used.system - cpu.system) / sent * 1e6
    print(
        f"{count} producer(s): {sent / elapsed_s:,.0f} msg/s; CPU per message: user "
        f"{user_us:.0f} us, system {system_us:.0f} us (load average {os.getloadavg()[0]:.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=5000, help="after the warm-up")
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("--policy", choices=[p.value for p in SyncPolicy], default="write_no_sync")
    parser.add_argument("--dir", type=Path, help="where to make the temporary share")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="primacy-bench-hot-", dir=args.dir))
    lease = Lease(PosixShare(root), "bench")
    try:
        assert lease.try_acquire()
        epoch = lease.claim_epoch()
        config = StoreConfig(share=root, node_id="bench", sync_policy=SyncPolicy(args.policy))
        store = JournalStore.open(config, epoch=epoch, fencing_check=lease.revalidate)
        try:
            asyncio.run(producers(store, args.producers, args.messages))
        finally:
            store.close()
    finally:
        lease.release()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
