"""The POSIX lock file and epoch claims on a real directory, with real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.share.layout import ShareLayout
from primacy.share.port import LockLost, latest_epoch
from primacy.share.posix import PosixShare
from primacy.share.posix_lock import LockMethod, ShareLock
from primacy.share.records import EpochRecord, HolderInfo

METHODS = [LockMethod.FLOCK, LockMethod.POSIX]

HOLDER_SCRIPT = textwrap.dedent("""
    import sys, time
    from primacy.share.posix_lock import ShareLock, LockMethod
    from primacy.share.records import HolderInfo
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
            [sys.executable, "-c", HOLDER_SCRIPT, str(ShareLayout(share).lock_file), method],
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
    mine = ShareLock(ShareLayout(share).lock_file, method)
    assert not mine.try_acquire()
    assert mine.read_holder() == HolderInfo.from_bytes((ShareLayout(share).lock_file).read_bytes())
    assert mine.read_holder().epoch == 2  # type: ignore[union-attr]
    holders[0].stop()
    assert mine.try_acquire()
    mine.revalidate()
    mine.close()


@pytest.mark.parametrize("method", METHODS)
def test_holder_keeps_its_lock_while_writing_and_reading_the_holder_record(
    share: Path, method: LockMethod, holders: list[Holder]
) -> None:
    mine = ShareLock(ShareLayout(share).lock_file, method)
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
    old = ShareLock(ShareLayout(share).lock_file, method)
    assert old.try_acquire()
    (ShareLayout(share).lock_file).unlink()
    holders.append(Holder(share, method))
    assert holders[0].answer == "held"
    with pytest.raises(LockLost, match=r"replaced|deleted"):
        old.revalidate()
    old.close()


def test_a_posix_lock_dropped_behind_the_holders_back_is_refused_at_the_next_check(
    share: Path, holders: list[Holder]
) -> None:
    """DESIGN.md's pitfall, for real: closing any other descriptor of the lock file drops the
    process's POSIX lock; another process takes it; the old holder's next check (the one
    after every commit) must fail with the reason, not re-take a lock it no longer has."""
    lock_file = ShareLayout(share).lock_file
    old = ShareLock(lock_file, LockMethod.POSIX)
    assert old.try_acquire()
    old.revalidate()
    os.close(os.open(lock_file, os.O_RDONLY))  # the whole process's lock goes with it
    holders.append(Holder(share, LockMethod.POSIX))
    assert holders[0].answer == "held"
    with pytest.raises(LockLost, match="refused: another holder has it"):
        old.revalidate()
    old.close()


def test_missing_lock_file_is_reported_as_deleted(share: Path) -> None:
    lock = ShareLock(ShareLayout(share).lock_file)
    assert lock.try_acquire()
    (ShareLayout(share).lock_file).unlink()
    with pytest.raises(LockLost, match="deleted"):
        lock.revalidate()


CLAIM_SCRIPT = textwrap.dedent("""
    import sys
    from primacy.share.posix import PosixShare
    from primacy.share.records import EpochRecord
    port = PosixShare(sys.argv[1])
    sys.stdin.readline()  # start together
    print(port.claim_epoch(EpochRecord(0, node_id=sys.argv[2])), flush=True)
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
    port = PosixShare(share)
    assert latest_epoch(port) == count
    claimed_by = {port.read_epoch(e).node_id for e in epochs}  # type: ignore[union-attr]
    assert len(claimed_by) == count


def test_a_stale_listing_hint_still_finds_the_next_free_epoch(share: Path) -> None:
    port = PosixShare(share)
    for epoch in (1, 2, 3):
        # Files another node created: a listing need not show them yet.
        ShareLayout(share).epochs.mkdir(exist_ok=True)
        ShareLayout(share).epoch_file(epoch).write_text("{}")
    port.listed_epochs = lambda: []  # type: ignore[method-assign]  # a stale, cached listing
    # Claiming walks past existing names with exclusive creates, whatever the hint.
    assert port.claim_epoch(EpochRecord(0, node_id="n")) == 4
    assert port.epoch_exists(4) and not port.epoch_exists(5)


def test_lock_file_created_with_readable_mode(share: Path) -> None:
    lock = ShareLock(ShareLayout(share).lock_file)
    assert lock.try_acquire()
    assert (os.stat(ShareLayout(share).lock_file).st_mode & 0o777) & 0o044
