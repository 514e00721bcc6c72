"""A journal written by the real store through several failovers, and what was written to it.

Four masters in turn on one share, each with a real ``Lease``:

1. node-a, epoch 1: serves, then stops gracefully (a "stopping" role record).
2. node-b, epoch 2: serves (and journals a duplicate message id), then crashes.
3. node-c, epoch 3: serves, then loses its lock (the lock file is deleted and
   node-a takes epoch 4); its next write lands past epoch 4's fence.
4. node-a, epoch 4: serves; one of its batches is damaged afterwards by a
   flipped byte, with valid batches after it. It is still master at the end.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from primacy.locker.lease import Lease
from primacy.share.layout import LOCK_FILE_NAME
from primacy.share.posix import PosixShare
from primacy.store import format as fmt
from primacy.store.config import StoreConfig
from primacy.store.errors import JournalError
from primacy.store.journal import JournalStore
from primacy.store.segments import iter_batches, list_segments, read_segment, scan_segment

SMALL_SEGMENT_BYTES = 4096  # so epochs span several segments, some of them sealed


@dataclass
class WrittenJournal:
    """What the producers and the store saw while the journal was written."""

    share: Path
    sends: list[tuple[str, str]] = field(default_factory=list)  # acknowledged (dest, id)
    acks: list[tuple[str, str]] = field(default_factory=list)
    deliveries: list[tuple[str, str]] = field(default_factory=list)  # one per DELIVER record
    role_records: int = 0
    fenced_ids: list[str] = field(default_factory=list)  # written by the stale master, refused
    damaged_ids: list[str] = field(default_factory=list)  # in the batch whose byte was flipped
    damaged_sequences: list[int] = field(default_factory=list)
    duplicate_id: str = ""
    nodes_by_epoch: dict[int, str] = field(default_factory=dict)


def role_event(node: str, old: str, new: str, epoch: int, reason: str) -> dict[str, object]:
    """The control record the supervisor journals on a role change."""
    return {"event": "role", "node": node, "from": old, "to": new, "epoch": epoch, "reason": reason}


@contextmanager
def master(
    written: WrittenJournal, node: str, lease: Lease | None = None
) -> Iterator[tuple[Lease, JournalStore]]:
    """Take the lock, claim an epoch, open the journal and journal becoming master."""
    lease = lease or Lease(PosixShare(written.share), node)
    assert lease.try_acquire(), f"{node} could not take the lock"
    epoch = lease.claim_epoch()
    config = StoreConfig(share=written.share, node_id=node, segment_max_bytes=SMALL_SEGMENT_BYTES)
    store = JournalStore.open(config, epoch=epoch, fencing_check=lease.revalidate)
    written.nodes_by_epoch[epoch] = node
    store.append_control(role_event(node, "ACQUIRED", "MASTER", epoch, "lock acquired")).result(5)
    written.role_records += 1
    try:
        yield lease, store
    finally:
        store.close()


def send(written: WrittenJournal, store: JournalStore, destination: str, ids: list[str]) -> None:
    """Submit together (so some share a batch), then wait for every acknowledgement."""
    futures: list[Future[int]] = [
        store.append_send(destination, mid, f"body of {mid}".encode(), {"app": "test"})
        for mid in ids
    ]
    for future in futures:
        future.result(timeout=5)
    written.sends += [(destination, mid) for mid in ids]


def deliver(written: WrittenJournal, store: JournalStore, destination: str, ids: list[str]) -> None:
    """What the broker journals when it hands messages to a consumer."""
    for mid in ids:
        store.append_delivery(destination, mid).result(timeout=5)
    written.deliveries += [(destination, mid) for mid in ids]


def ack(written: WrittenJournal, store: JournalStore, destination: str, ids: list[str]) -> None:
    deliver(written, store, destination, ids)
    for mid in ids:
        store.append_ack(destination, mid).result(timeout=5)
    written.acks += [(destination, mid) for mid in ids]


def flip_byte_in_batch_of(journal: Path, sequence: int) -> None:
    """Damage the batch holding ``sequence``: one byte of its heap changes after it was synced."""
    for segment in list_segments(journal):
        data = read_segment(segment)
        scan = scan_segment(segment, data)
        for batch, _ in iter_batches(data, scan):
            if batch.header.first_sequence <= sequence <= batch.header.last_sequence:
                at = batch.offset + fmt.BATCH_HEADER_LEN + fmt.RECORD_HEADER_LEN + 2
                damaged = bytearray(data)
                damaged[at] ^= 0x20
                segment.path.write_bytes(bytes(damaged))
                return
    raise AssertionError(f"sequence {sequence} is in no valid batch")


def write_failover_journal(share: Path) -> WrittenJournal:
    """Write the four tenures described in the module docstring."""
    share.mkdir(parents=True, exist_ok=True)
    written = WrittenJournal(share)
    with master(written, "node-a") as (lease, store):
        send(written, store, "orders", [f"a{i}" for i in range(30)])
        send(written, store, "billing", [f"ab{i}" for i in range(12)])
        deliver(written, store, "orders", [f"a{i}" for i in range(10, 20)])  # never acked here
        ack(written, store, "orders", [f"a{i}" for i in range(10)])
        store.append_control(role_event("node-a", "MASTER", "STOPPING", 1, "shutdown")).result(5)
        written.role_records += 1
    lease.release()

    time.sleep(0.05)  # so the gaps between tenures are measurable
    with master(written, "node-b") as (lease, store):
        send(written, store, "orders", [f"b{i}" for i in range(20)])
        # Sent and first delivered under epoch 1: redelivered here, then acked.
        ack(written, store, "orders", [f"a{i}" for i in range(10, 20)])
        written.duplicate_id = "b3"
        send(written, store, "orders", ["b3"])  # a resend the broker failed to drop
        ack(written, store, "billing", [f"ab{i}" for i in range(6)])
    lease.abandon()  # a crash: no stopping record

    time.sleep(0.05)
    with master(written, "node-c") as (lease_c, store_c):
        send(written, store_c, "orders", [f"c{i}" for i in range(15)])
        (share / LOCK_FILE_NAME).unlink()  # node-c loses its lock without knowing
        with master(written, "node-a") as (_, store):
            written.fenced_ids = ["stale0"]
            try:
                store_c.append_send("orders", "stale0", b"too late").result(timeout=5)
            except JournalError:
                pass
            else:
                raise AssertionError("the stale master's write was acknowledged")
            send(written, store, "orders", [f"d{i}" for i in range(20)])
            ack(written, store, "orders", [f"c{i}" for i in range(5)] + ["d0", "d1"])
            doomed = store.append_send("orders", "doomed", b"lost to a flipped byte").result(5)
            written.damaged_ids, written.damaged_sequences = ["doomed"], [doomed]
            send(written, store, "orders", [f"e{i}" for i in range(8)])
    lease_c.abandon()
    flip_byte_in_batch_of(share / "journal", doomed)
    return written
