"""The lock file, epochs and the lease, with real files and real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.locker.epoch import EpochRegistry
from primacy.locker.lease import Lease, LeaseLost
from primacy.locker.lockfile import LOCK_FILE_NAME, HolderInfo, LockLost, LockMethod, ShareLock

METHODS = [LockMethod.FLOCK, LockMethod.POSIX]

HOLDER_SCRIPT = textwrap.dedent("""
    import sys, time
    from primacy.locker.lockfile import ShareLock, LockMethod, HolderInfo
    lock = ShareLock(sys.argv[1], LockMethod(sys.argv[2]))
    got = lock.try_acquire()
    if got:
        lock.write_holder(HolderInfo.for_this_process("child", 1))
        # Reading and rewriting through the held descriptor must not drop a POSIX lock.
        lock.read_holder()
        lock.write_holder(HolderInfo.for_this_process("child", 2))
    print("held" if got else "busy", flush=True)
    sys.stdin.read()
""")


class Holder:
    """Another process that takes the lock and keeps it until its stdin closes."""

    def __init__(self, share: Path, method: LockMethod) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER_SCRIPT, str(share), method],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.answer = self.process.stdout.readline().strip()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.stop()


@pytest.mark.parametrize("method", METHODS)
def test_only_one_process_holds_the_lock_until_it_dies(
    share: Path, method: LockMethod, holders: list[Holder]
) -> None:
    holders.append(Holder(share, method))
    assert holders[0].answer == "held"
    mine = ShareLock(share, method)
    assert not mine.try_acquire()
    assert mine.read_holder() == HolderInfo.from_bytes((share / LOCK_FILE_NAME).read_bytes())
    assert mine.read_holder().epoch == 2  # type: ignore[union-attr]
    holders[0].stop()
    assert mine.try_acquire()
    mine.revalidate()
    mine.close()


@pytest.mark.parametrize("method", METHODS)
def test_holder_keeps_its_lock_while_writing_and_reading_the_holder_record(
    share: Path, method: LockMethod, holders: list[Holder]
) -> None:
    mine = ShareLock(share, method)
    assert mine.try_acquire()
    for epoch in range(3):
        mine.write_holder(HolderInfo.for_this_process("me", epoch))
        assert mine.read_holder().epoch == epoch  # type: ignore[union-attr]
    holders.append(Holder(share, method))
    assert holders[0].answer == "busy"
    mine.close()


@pytest.mark.parametrize("method", METHODS)
def test_deleted_lock_file_is_recreated_by_a_slave_and_the_old_holder_notices(
    share: Path, method: LockMethod, holders: list[Holder]
) -> None:
    old = ShareLock(share, method)
    assert old.try_acquire()
    (share / LOCK_FILE_NAME).unlink()
    holders.append(Holder(share, method))
    assert holders[0].answer == "held"
    with pytest.raises(LockLost, match=r"replaced|deleted"):
        old.revalidate()
    old.close()


def test_missing_lock_file_is_reported_as_deleted(share: Path) -> None:
    lock = ShareLock(share)
    assert lock.try_acquire()
    (share / LOCK_FILE_NAME).unlink()
    with pytest.raises(LockLost, match="deleted"):
        lock.revalidate()


def test_release_marks_the_record_released(share: Path) -> None:
    lease = Lease(share, "n1")
    assert lease.try_acquire()
    epoch = lease.claim_epoch()
    lease.release()
    record = HolderInfo.from_bytes((share / LOCK_FILE_NAME).read_bytes())
    assert record is not None and record.released and record.epoch == epoch


CLAIM_SCRIPT = textwrap.dedent("""
    import sys
    from primacy.locker.epoch import EpochRegistry
    registry = EpochRegistry(sys.argv[1])
    sys.stdin.readline()  # start together
    print(registry.claim_next({"node_id": sys.argv[2]}), flush=True)
""")


def test_concurrent_claims_get_distinct_contiguous_epochs(share: Path) -> None:
    count = 8
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIM_SCRIPT, str(share), f"n{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    epochs = sorted(int(process.communicate(timeout=30)[0]) for process in processes)
    assert epochs == list(range(1, count + 1))
    registry = EpochRegistry(share)
    assert registry.latest() == count
    claimed_by = {json.loads((share / "epochs" / str(e)).read_text())["node_id"] for e in epochs}
    assert len(claimed_by) == count


def test_a_stale_listing_hint_still_finds_the_next_free_epoch(share: Path) -> None:
    registry = EpochRegistry(share)
    for _ in range(3):
        registry.claim_next({})
    # Claiming walks past existing names with exclusive creates, whatever the hint.
    assert registry.claim_next({}) == 4
    assert registry.is_current(4) and not registry.is_current(3)


def test_lease_is_lost_once_a_later_epoch_exists(share: Path) -> None:
    lease = Lease(share, "old")
    assert lease.try_acquire()
    epoch = lease.claim_epoch()
    lease.revalidate()
    EpochRegistry(share).claim_next({"node_id": "someone else"})
    with pytest.raises(LeaseLost, match=f"epoch {epoch + 1}"):
        lease.revalidate()
    # A lost lease must not overwrite the lock file's record on release.
    before = (share / LOCK_FILE_NAME).read_bytes()
    lease.release()
    assert (share / LOCK_FILE_NAME).read_bytes() == before


def test_lease_without_epoch_is_not_valid(share: Path) -> None:
    lease = Lease(share, "n1")
    assert lease.try_acquire()
    with pytest.raises(LeaseLost, match="no epoch"):
        lease.revalidate()


def test_epoch_claim_needs_the_lock(share: Path) -> None:
    with pytest.raises(LeaseLost):
        Lease(share, "n1").claim_epoch()


def test_lock_file_created_with_readable_mode(share: Path) -> None:
    lock = ShareLock(share)
    assert lock.try_acquire()
    assert (os.stat(share / LOCK_FILE_NAME).st_mode & 0o777) & 0o044


def test_terms_travel_from_one_master_to_the_next(share: Path) -> None:
    first = Lease(share, "first")
    assert first.try_acquire()
    first.claim_epoch({"lock_keep_alive_period_ms": 250})
    first.update_terms({"lock_keep_alive_period_ms": 2000})
    first.abandon()
    second = Lease(share, "second")
    assert second.try_acquire()
    second.claim_epoch({"lock_keep_alive_period_ms": 250})
    (previous,) = second.terms_to_outlast()  # the first master outlasted nobody: it counts
    assert previous["lock_keep_alive_period_ms"] == 2000 and previous["node_id"] == "first"


def test_updating_terms_after_the_lease_is_lost_raises(share: Path) -> None:
    lease = Lease(share, "old")
    assert lease.try_acquire()
    lease.claim_epoch({"lock_keep_alive_period_ms": 250})
    EpochRegistry(share).claim_next({"node_id": "new"})
    with pytest.raises(LeaseLost):
        lease.update_terms({"lock_keep_alive_period_ms": 5000})


def test_a_claim_that_never_outlasted_passes_on_what_it_waited_for(share: Path) -> None:
    first = Lease(share, "first")
    assert first.try_acquire()
    first.claim_epoch({"lock_keep_alive_period_ms": 2000})
    first.mark_outlasted()
    first.abandon()
    second = Lease(share, "second")  # killed during its takeover wait: never outlasted
    assert second.try_acquire()
    second.claim_epoch({"lock_keep_alive_period_ms": 100})
    assert second.terms_to_outlast()[0]["node_id"] == "first"
    second.abandon()
    third = Lease(share, "third")
    assert third.try_acquire()
    third.claim_epoch({"lock_keep_alive_period_ms": 100})
    walked = third.terms_to_outlast()
    assert [r["node_id"] for r in walked] == ["second", "first"]
    assert max(r["lock_keep_alive_period_ms"] for r in walked) == 2000
    third.mark_outlasted()
    third.abandon()
    fourth = Lease(share, "fourth")
    assert fourth.try_acquire()
    fourth.claim_epoch({"lock_keep_alive_period_ms": 100})
    assert [r["node_id"] for r in fourth.terms_to_outlast()] == ["third"]


def test_the_walk_skips_an_empty_record_and_stops_at_a_legacy_one(share: Path) -> None:
    registry = EpochRegistry(share)
    registry.claim_next({"node_id": "legacy", "lock_keep_alive_period_ms": 700})  # no term
    (share / "epochs" / "2").write_text("")  # a claimant that died before writing its record
    lease = Lease(share, "now")
    assert lease.try_acquire()
    lease.claim_epoch({"lock_keep_alive_period_ms": 100})
    assert lease.epoch == 3
    assert [r["node_id"] for r in lease.terms_to_outlast()] == ["legacy"]


def test_a_rewritten_epoch_record_is_never_seen_empty(share: Path) -> None:
    # A claimant reads the previous record to learn how long to wait; a rewrite
    # (a keepalive edited at run time, the end of a takeover wait) must never
    # show it an empty or partial record.
    lease = Lease(share, "writer")
    assert lease.try_acquire()
    epoch = lease.claim_epoch({"lock_keep_alive_period_ms": 250})
    registry = EpochRegistry(share)
    seen: list[object] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.append(registry.read(epoch))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for period in range(300):
            lease.update_terms({"lock_keep_alive_period_ms": 250 + period})
    finally:
        stop.set()
        reader.join()
    assert seen and None not in seen
    assert registry.read(epoch)["lock_keep_alive_period_ms"] == 549
    assert sorted(p.name for p in (share / "epochs").iterdir()) == [str(epoch)]


def test_a_graceful_release_marks_the_epoch_record_an_abandon_does_not(share: Path) -> None:
    first = Lease(share, "first")
    assert first.try_acquire()
    first.claim_epoch({"lock_keep_alive_period_ms": 250})
    first.mark_outlasted()
    first.release()  # stopped claiming, then let go: nothing left to outlast
    second = Lease(share, "second")
    assert second.try_acquire()
    second.claim_epoch({"lock_keep_alive_period_ms": 250})
    assert Lease.handed_over(second.terms_to_outlast())
    second.mark_outlasted()
    second.abandon()  # a crash or a lost lease: its claim may still run
    third = Lease(share, "third")
    assert third.try_acquire()
    third.claim_epoch({"lock_keep_alive_period_ms": 250})
    assert not Lease.handed_over(third.terms_to_outlast())
    assert EpochRegistry(share).read(1)["released"] is True
    assert "released" not in EpochRegistry(share).read(2)


def test_a_release_during_the_takeover_wait_hands_over_nothing(share: Path) -> None:
    first = Lease(share, "first")
    assert first.try_acquire()
    first.claim_epoch({"lock_keep_alive_period_ms": 2000})
    first.mark_outlasted()
    first.abandon()  # lost its lock unknowingly: may claim for 2 s more
    second = Lease(share, "second")
    assert second.try_acquire()
    second.claim_epoch({"lock_keep_alive_period_ms": 100})
    second.release()  # SIGTERM in its takeover wait: it never claimed, first may still
    third = Lease(share, "third")
    assert third.try_acquire()
    third.claim_epoch({"lock_keep_alive_period_ms": 100})
    walked = third.terms_to_outlast()
    assert [r["node_id"] for r in walked] == ["second", "first"]
    assert not Lease.handed_over(walked)
