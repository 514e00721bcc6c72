"""The share is untrusted input: odd names, symlinks and FIFOs never mislead or hang a node."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from primacy.share.layout import ShareLayout
from primacy.share.port import latest_epoch, latest_epoch_hint
from primacy.share.posix import PosixShare
from primacy.share.posix_lock import ShareLock, read_holder_from_outside
from primacy.share.records import EpochRecord, NodeEntry, parse_epoch_name
from primacy.store.checkpoint import checkpoint_name, list_checkpoints
from primacy.store.segments import list_segments, segment_name


@pytest.mark.parametrize("name", ["²", "٣", "007", "+7", "-1", "7 ", "0", "", "9" * 30, "1e3"])
def test_only_canonical_ascii_epoch_names_count(name: str) -> None:
    assert parse_epoch_name(name) is None


def test_odd_entries_in_epochs_neither_crash_nor_steer_the_next_claim(share: Path) -> None:
    port = PosixShare(share)
    port.layout.epochs.mkdir()
    for odd in ("²", "007", "9" * 30, ".5.tmp", "x"):
        (port.layout.epochs / odd).write_text("{}")
    assert latest_epoch_hint(port) == 0
    assert port.claim_epoch(EpochRecord(0, node_id="a")) == 1


def _finishes(work: object, timeout_s: float = 5.0) -> bool:
    assert callable(work)
    runner = threading.Thread(target=work, daemon=True)
    runner.start()
    runner.join(timeout_s)
    return not runner.is_alive()


def test_a_fifo_as_an_epoch_record_is_unreadable_not_a_hang(share: Path) -> None:
    port = PosixShare(share)
    port.layout.epochs.mkdir()
    os.mkfifo(port.layout.epoch_file(1))
    results: list[object] = []
    assert _finishes(lambda: results.append(port.read_epoch(1)))
    assert results == [None]


def test_a_huge_or_deeply_nested_epoch_record_is_unreadable(share: Path) -> None:
    port = PosixShare(share)
    port.layout.epochs.mkdir()
    port.layout.epoch_file(1).write_text("[" * 100_000 + "]" * 100_000)
    port.layout.epoch_file(2).write_bytes(b"{" + b" " * (1 << 20) + b"}")
    assert port.read_epoch(1) is None
    assert port.read_epoch(2) is None


def test_a_symlinked_lock_file_is_replaced_never_followed(share: Path, tmp_path: Path) -> None:
    """A symlink at the lock file's name: the holder record once went wherever it pointed.
    It is removed (its target untouched) and the lock taken on a file of the share's own, so
    a planted entry cannot keep the group without a master either."""
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    lock_file = ShareLayout(share).lock_file
    lock_file.symlink_to(outside)
    with pytest.raises(OSError):
        read_holder_from_outside(lock_file)  # a reader never follows it
    lock = ShareLock(lock_file)
    assert lock.try_acquire()
    assert outside.read_text() == "precious\n"
    assert not lock_file.is_symlink() and lock_file.is_file()
    lock.close()


def test_a_fifo_as_the_lock_file_is_replaced_without_blocking(share: Path) -> None:
    lock_file = ShareLayout(share).lock_file
    os.mkfifo(lock_file)
    taken: list[bool] = []
    assert _finishes(lambda: taken.append(ShareLock(lock_file).try_acquire()))
    assert taken == [True] and lock_file.is_file()


def test_a_directory_as_the_lock_file_is_refused_with_the_reason(share: Path) -> None:
    lock_file = ShareLayout(share).lock_file
    lock_file.mkdir()
    (lock_file / "keep").write_text("x")
    with pytest.raises(OSError, match="not a regular file; remove it"):
        ShareLock(lock_file).try_acquire()


def test_an_epochs_directory_swapped_for_a_symlink_fails_the_lease_check(
    share: Path, tmp_path: Path
) -> None:
    """The check after every commit looks up ``epochs/N+1`` without following a symlink
    put in the directory's place: an error, never an answer from somewhere else."""
    port = PosixShare(share)
    assert port.try_lock()
    epoch = port.claim_epoch(EpochRecord(0, node_id="a"))
    assert not port.epoch_exists(epoch + 1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    port.layout.epochs.rename(tmp_path / "moved")
    port.layout.epochs.symlink_to(elsewhere)
    with pytest.raises(OSError, match="not a directory of its own"):
        port.epoch_exists(epoch + 1)
    port.drop_lock()


def test_a_planted_temporary_epoch_record_is_not_followed(share: Path, tmp_path: Path) -> None:
    port = PosixShare(share)
    epoch = port.claim_epoch(EpochRecord(0, node_id="a", outlasted=False))
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    (port.layout.epochs / f".{epoch}.{os.getpid()}.tmp").symlink_to(outside)
    port.rewrite_epoch(EpochRecord(epoch, node_id="a", outlasted=True))
    assert outside.read_text() == "precious\n"
    assert port.read_epoch(epoch) == EpochRecord(epoch, node_id="a", outlasted=True)


def test_segments_and_checkpoints_of_epochs_past_ten_digits_are_found(tmp_path: Path) -> None:
    for epoch, sequence in ((9_999_999_999, 1), (10_000_000_000, 7), (2**64 - 1, 9)):
        (tmp_path / segment_name(epoch, sequence)).write_bytes(b"")
        (tmp_path / checkpoint_name(sequence, epoch)).write_bytes(b"")
    # Names a node never writes are not segments, whatever they look like.
    for odd in (
        "0000000001-0000000000000000000².seg",
        "1-00000000000000000001.seg",
        f"{2**64:020d}-00000000000000000001.seg",
        "00000000001-00000000000000000001.seg",
    ):
        (tmp_path / odd).write_bytes(b"")
    found = [(s.epoch, s.first_sequence) for s in list_segments(tmp_path)]
    assert found == [(9_999_999_999, 1), (10_000_000_000, 7), (2**64 - 1, 9)]
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        checkpoint_name(9, 2**64 - 1),
        checkpoint_name(7, 10_000_000_000),
        checkpoint_name(1, 9_999_999_999),
    ]


def test_the_start_up_probe_and_doctor_scratch_file_do_not_follow_a_planted_symlink(
    share: Path, tmp_path: Path
) -> None:
    """Found by trying: the share probe opened its name with O_TRUNC through a planted symlink,
    emptying a file outside the share at every ``primacy run`` and ``primacy doctor``."""
    from primacy.locker.probe import check_share
    from primacy.nfs_profiles.profiles import load_profile
    from primacy.nfs_profiles.round_trips import time_fsync_round_trip
    from primacy.share.posix_lock import LockMethod

    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    host, pid = os.uname().nodename, os.getpid()
    (share / f".primacy-probe-{host}-{pid}").symlink_to(outside)
    (share / f".primacy-doctor-{host}-{pid}").symlink_to(outside)
    check_share(share, LockMethod.POSIX)
    time_fsync_round_trip(share, load_profile("local"))
    assert outside.read_text() == "precious\n"
    assert not any(p.name.startswith(".primacy-") for p in share.iterdir())


@pytest.mark.parametrize("directory", ["epochs", "nodes"])
def test_a_symlink_in_place_of_a_share_directory_is_refused_not_followed(
    share: Path, tmp_path: Path, directory: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (share / directory).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OSError, match="not a directory of its own"):
        if directory == "epochs":
            PosixShare(share).claim_epoch(EpochRecord(0, node_id="a"))
        else:
            PosixShare(share).publish_node(
                NodeEntry("a", "h", 1, "127.0.0.1:1", "normal", "slave", None, 0)
            )
    assert list(elsewhere.iterdir()) == []


def test_a_directory_swapped_for_a_symlink_is_not_read_through_either(
    share: Path, tmp_path: Path
) -> None:
    """Reads too go relative to a descriptor of the directory opened without following a
    symlink: after a swap, listing and reading refuse instead of reading the planter's files."""
    port = PosixShare(share)
    port.claim_epoch(EpochRecord(0, node_id="a"))
    port.publish_node(NodeEntry("a", "h", 1, "127.0.0.1:1", "normal", "slave", None, 0))
    port.layout.journal.mkdir()
    planted = tmp_path / "planted"
    for name in ("1", "2", "3", "a.json", "b.json", "0000000001-00000000000000000001.seg"):
        (planted / name).parent.mkdir(exist_ok=True)
        (planted / name).write_text("{}")
    for directory in ("epochs", "nodes", "journal"):
        (share / directory).rename(share / f"{directory}.moved")
        (share / directory).symlink_to(planted, target_is_directory=True)
    with pytest.raises(OSError, match="not a directory of its own"):
        latest_epoch(port)
    with pytest.raises(OSError, match="not a directory of its own"):
        port.epoch_exists(1)
    with pytest.raises(OSError, match="not a directory of its own"):
        port.node_entries()
    with pytest.raises(OSError, match="not a directory of its own"):
        list_segments(port.layout.journal)
