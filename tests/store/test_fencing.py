"""Two masters on one share: nothing the stale one writes past the new fence is acked or recovered.

The stale master keeps appending from several threads while the new one takes
over; its fencing check is the real ``Lease.revalidate`` on a real share.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from primacy.locker.lease import Lease
from primacy.share.layout import LOCK_FILE_NAME
from primacy.share.posix import PosixShare
from primacy.share.records import EpochRecord
from primacy.store import format as fmt
from primacy.store import journal as journal_module
from primacy.store.config import StoreConfig
from primacy.store.errors import JournalError, JournalWriteFailed
from primacy.store.journal import JournalStore
from primacy.store.recovery import read_first_batch_fence, recover
from primacy.store.segments import SegmentRef, list_segments


class StaleAppenders:
    """Threads appending to the old master's store until it refuses, remembering every outcome."""

    def __init__(self, store: JournalStore, threads: int = 8) -> None:
        self.store = store
        self.acked: set[str] = set()
        self.refused: set[str] = set()
        self.stop = threading.Event()
        self.running = threading.Event()
        self.running.set()
        self._parked = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(n,)) for n in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self, worker: int) -> None:
        count = 0
        while not self.stop.is_set():
            if not self.running.is_set():
                self._parked.release()
                self.running.wait()
            message_id = f"a{worker}-{count}"
            count += 1
            try:
                future: Future[int] = self.store.append_send("q", message_id, b"stale")
            except JournalError:
                return  # the store stopped accepting writes
            try:
                future.result(timeout=10)
                outcome = self.acked
            except JournalError:
                outcome = self.refused
            with self._lock:
                outcome.add(message_id)

    def pause(self) -> None:
        """Return once every thread is idle, none with an append in flight."""
        self.running.clear()
        for _ in self._threads:
            self._parked.acquire()

    def resume(self) -> None:
        self.running.set()

    def join(self) -> None:
        self.stop.set()
        self.running.set()
        for thread in self._threads:
            thread.join()


def fence_of(journal: Path, fence_epoch: int) -> dict[tuple[int, int], int]:
    """The fence the master of ``fence_epoch`` wrote: segment key -> length it accepted."""
    for segment in list_segments(journal):
        found = read_first_batch_fence(segment)
        if found is not None and found[0] == fence_epoch:
            return {(e.epoch, e.first_sequence): e.length for e in found[1]}
    raise AssertionError(f"no fence of epoch {fence_epoch}")


def records_past_fence(journal: Path, stale_epoch: int, fence_epoch: int) -> set[str]:
    """Message ids the stale epoch wrote in batches ending beyond the new master's fence."""
    fence = fence_of(journal, fence_epoch)
    past = set()
    for segment in list_segments(journal):
        if segment.epoch != stale_epoch:
            continue
        limit = fence.get(segment.key, 0)
        data = segment.path.read_bytes()
        offset = fmt.decode_segment_header(data).header_len
        while offset < len(data):
            status, header = fmt.check_batch(data, offset)
            if status is not fmt.BatchStatus.OK or header is None:
                break
            if offset + header.batch_len > limit:
                past |= {
                    r.message_id for r in fmt.iter_records(data[offset : offset + header.batch_len])
                }
            offset += header.batch_len
    return past


def config(share: Path, node: str) -> StoreConfig:
    return StoreConfig(share=share, node_id=node)


@pytest.mark.parametrize("how_a_loses", ["lock file deleted", "epoch claimed behind its back"])
@pytest.mark.parametrize("timing", ["racing", "stale writes after the fence"])
def test_stale_master_writes_past_the_fence_are_never_acked_or_recovered(
    share: Path, how_a_loses: str, timing: str
) -> None:
    journal = share / "journal"
    lease_a = Lease(PosixShare(share), "node-a")
    assert lease_a.try_acquire()
    epoch_a = lease_a.claim_epoch()
    store_a = JournalStore.open(
        config(share, "node-a"), epoch=epoch_a, fencing_check=lease_a.revalidate
    )
    early = {f"early{i}" for i in range(20)}
    for message_id in sorted(early):
        store_a.append_send("q", message_id, b"ok").result(timeout=5)
    stale = StaleAppenders(store_a)
    if timing != "racing":
        stale.pause()  # so that a's next writes land after b's fence, not before it

    lease_b: Lease | None = None
    if how_a_loses == "lock file deleted":
        (share / LOCK_FILE_NAME).unlink()  # an operator's mistake; node b recreates it
        lease_b = Lease(PosixShare(share), "node-b")
        assert lease_b.try_acquire()
        epoch_b = lease_b.claim_epoch()
        check_b: Callable[[], None] = lease_b.revalidate
    else:  # node b got the lock where a cannot see it (say, an expired NFSv4 lease)
        registry = PosixShare(share)
        epoch_b = registry.claim_epoch(EpochRecord(0, node_id="node-b"))

        def check_b() -> None:
            if registry.epoch_exists(epoch_b + 1):
                raise RuntimeError("epoch moved on")

    store_b = JournalStore.open(config(share, "node-b"), epoch=epoch_b, fencing_check=check_b)
    acked_b = {f"b{i}" for i in range(10)}
    for message_id in sorted(acked_b):
        store_b.append_send("q", message_id, b"new").result(timeout=5)
    stale.resume()
    stale.join()
    store_a.close()
    store_b.close()
    if lease_b is not None:
        lease_b.release()
    lease_a.abandon()

    recovered = {m for queue in recover(journal).state.pending.values() for m in queue}
    past_fence = records_past_fence(journal, epoch_a, epoch_b)
    assert stale.refused, "the stale master was never refused: the test did not race"
    if timing != "racing":
        assert past_fence, "no stale write landed past the fence"
    assert early | acked_b | stale.acked <= recovered
    assert not past_fence & stale.acked
    assert not past_fence & recovered
    fenced = recover(journal).report.fenced_records
    assert fenced == len(past_fence)


def test_fenced_writes_are_reported_with_the_loss_averted_code(
    share: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = share / "journal"
    registry = PosixShare(share)
    epoch_a = registry.claim_epoch(EpochRecord(0, node_id="node-a"))
    store_a = JournalStore.open(config(share, "a"), epoch=epoch_a, fencing_check=lambda: None)
    store_a.append_send("q", "kept", b"1").result(timeout=5)
    epoch_b = registry.claim_epoch(EpochRecord(0, node_id="node-b"))
    JournalStore.open(config(share, "b"), epoch=epoch_b, fencing_check=lambda: None).close()
    # A check blind to the epoch lets the stale write be "acked"; the fence still holds.
    store_a.append_send("q", "late", b"2").result(timeout=5)
    store_a.close()
    caplog.clear()
    result = recover(journal)
    assert {m for q in result.state.pending.values() for m in q} == {"kept"}
    assert result.report.fenced_records == 1
    assert any("PRIMACY-1014 transaction loss averted" in r.message for r in caplog.records)


def test_a_fence_whose_batch_is_damaged_later_still_holds(share: Path) -> None:
    journal = share / "journal"
    registry = PosixShare(share)
    epoch_a = registry.claim_epoch(EpochRecord(0, node_id="node-a"))
    store_a = JournalStore.open(config(share, "a"), epoch=epoch_a, fencing_check=lambda: None)
    store_a.append_send("q", "kept", b"1").result(timeout=5)
    epoch_b = registry.claim_epoch(EpochRecord(0, node_id="node-b"))
    # The new master opens and dies at once: no close, no checkpoint of its own later on.
    store_b = JournalStore.open(config(share, "b"), epoch=epoch_b, fencing_check=lambda: None)
    store_a.append_send("q", "late", b"2").result(timeout=5)  # a stale write past the fence
    store_a.close()
    # Bit rot in the fence batch: the checkpoint written before opening returned keeps it.
    [first_of_b] = [s for s in list_segments(journal) if s.epoch == epoch_b]
    data = bytearray(first_of_b.path.read_bytes())
    data[fmt.decode_segment_header(bytes(data)).header_len + fmt.BATCH_HEADER_LEN + 30] ^= 0x40
    first_of_b.path.write_bytes(bytes(data))
    result = recover(journal, log=False)
    assert {m for q in result.state.pending.values() for m in q} == {"kept"}
    assert result.report.fenced_records == 1
    store_b.close()


def test_a_new_master_whose_takeover_checkpoint_fails_does_not_open_the_journal(
    share: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = PosixShare(share)
    epoch_a = registry.claim_epoch(EpochRecord(0, node_id="node-a"))
    with JournalStore.open(config(share, "a"), epoch=epoch_a, fencing_check=lambda: None) as a:
        a.append_send("q", "kept", b"1").result(timeout=5)

    def full_share(*_: object) -> Path:  # the checkpoint is megabytes, the fence batch bytes
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_module, "write_checkpoint", full_share)
    epoch_b = registry.claim_epoch(EpochRecord(0, node_id="node-b"))
    writers_before = set(threading.enumerate())
    with pytest.raises(JournalWriteFailed, match="takeover checkpoint was not written"):
        JournalStore.open(config(share, "b"), epoch=epoch_b, fencing_check=lambda: None)
    started = set(threading.enumerate()) - writers_before
    assert not [t for t in started if t.name == "primacy-journal-writer"]  # closed again
    monkeypatch.undo()
    epoch_c = registry.claim_epoch(EpochRecord(0, node_id="node-c"))
    with JournalStore.open(config(share, "c"), epoch=epoch_c, fencing_check=lambda: None) as c:
        assert c.is_duplicate("q", "kept")  # nothing was lost meanwhile


SMALL_SEGMENT_BYTES = 4096  # the smallest the store allows, so a few messages rotate it
PAYLOAD = b"p" * 1500  # two fit in a segment beside its header and fence, a third does not


def epoch_segments(journal: Path, epoch: int) -> list[SegmentRef]:
    return [s for s in list_segments(journal) if s.epoch == epoch]


@pytest.mark.parametrize("how_a_goes_on", ["refused by its fencing check", "blind to the epoch"])
def test_a_segment_the_stale_master_starts_after_the_fence_is_ignored_whole(
    share: Path, how_a_goes_on: str, caplog: pytest.LogCaptureFixture
) -> None:
    journal = share / "journal"
    lease_a = Lease(PosixShare(share), "node-a")
    assert lease_a.try_acquire()
    epoch_a = lease_a.claim_epoch()
    blind = how_a_goes_on == "blind to the epoch"
    store_a = JournalStore.open(
        StoreConfig(share=share, node_id="node-a", segment_max_bytes=SMALL_SEGMENT_BYTES),
        epoch=epoch_a,
        fencing_check=(lambda: None) if blind else lease_a.revalidate,
    )
    for message_id in ("early0", "early1"):
        store_a.append_send("q", message_id, PAYLOAD).result(timeout=5)
    [listed] = epoch_segments(journal, epoch_a)  # the next append rotates

    (share / LOCK_FILE_NAME).unlink()  # node-a loses its lock without knowing
    lease_b = Lease(PosixShare(share), "node-b")
    assert lease_b.try_acquire()
    epoch_b = lease_b.claim_epoch()
    store_b = JournalStore.open(
        StoreConfig(share=share, node_id="node-b", segment_max_bytes=SMALL_SEGMENT_BYTES),
        epoch=epoch_b,
        fencing_check=lease_b.revalidate,
    )
    store_b.append_send("q", "b0", b"new master").result(timeout=5)

    late = [f"late{i}" for i in range(5 if blind else 1)]
    acked_late = []
    for message_id in late:
        try:
            store_a.append_send("q", message_id, PAYLOAD).result(timeout=5)
        except JournalError:
            break
        acked_late.append(message_id)
    store_a.close()
    store_b.close()
    lease_b.release()
    lease_a.abandon()
    # Precondition: node-a's late writes went to segments created after node-b's fence.
    unlisted = [s.name for s in epoch_segments(journal, epoch_a) if s != listed]
    assert unlisted, "the stale master never rotated into a new segment"
    fence_b = fence_of(journal, epoch_b)
    assert list(fence_b) == [listed.key]  # only the segment that existed at the takeover
    assert acked_late == (late if blind else [])  # a real fencing check refuses the write

    for use_checkpoint in (True, False):
        caplog.clear()
        result = recover(journal, use_checkpoint=use_checkpoint)
        pending = {m for queue in result.state.pending.values() for m in queue}
        assert pending == {"early0", "early1", "b0"}
        assert {w.segment for w in result.report.fenced} == set(unlisted)
        assert result.report.fenced_records == len(late)
        for write in result.report.fenced:  # the whole segment, from its first batch
            segment = journal / write.segment
            header_len = fmt.decode_segment_header(segment.read_bytes()).header_len
            assert (write.offset, write.length) == (header_len, segment.stat().st_size - header_len)
        averted = [r.message for r in caplog.records if "PRIMACY-1014" in r.message]
        assert len(averted) == len(unlisted)
        assert all("transaction loss averted" in line for line in averted)
        assert {name for name in unlisted if any(name in line for line in averted)} == set(unlisted)

    # The next master recovers the same, and its own fence keeps the segments ignored.
    registry = PosixShare(share)
    epoch_c = registry.claim_epoch(EpochRecord(0, node_id="node-c"))
    store_c = JournalStore.open(
        StoreConfig(share=share, node_id="node-c", segment_max_bytes=SMALL_SEGMENT_BYTES),
        epoch=epoch_c,
        fencing_check=lambda: None,
    )
    assert store_c.recovery.report.fenced_records == len(late)
    assert store_c.stats().fenced_records_at_open == len(late)
    pending_c = {m for queue in store_c.recovery.state.pending.values() for m in queue}
    assert pending_c == {"early0", "early1", "b0"}
    store_c.close()
    after_c = recover(journal, log=False)
    assert {m for q in after_c.state.pending.values() for m in q} == {"early0", "early1", "b0"}
