"""The share is untrusted input: odd names, symlinks and FIFOs never mislead or hang a node."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from primacy.locker.epoch import EpochRegistry, parse_epoch_name
from primacy.locker.lockfile import LOCK_FILE_NAME, ShareLock, read_holder_from_outside
from primacy.store.checkpoint import checkpoint_name, list_checkpoints
from primacy.store.segments import list_segments, segment_name


@pytest.mark.parametrize("name", ["²", "٣", "007", "+7", "-1", "7 ", "0", "", "9" * 30, "1e3"])
def test_only_canonical_ascii_epoch_names_count(name: str) -> None:
    assert parse_epoch_name(name) is None


def test_odd_entries_in_epochs_neither_crash_nor_steer_the_next_claim(share: Path) -> None:
    registry = EpochRegistry(share)
    registry.ensure_directory()
    for odd in ("²", "007", "9" * 30, ".5.tmp", "x"):
        (registry.directory / odd).write_text("{}")
    assert registry.latest_hint() == 0
    assert registry.claim_next({"node_id": "a"}) == 1


def _finishes(work: object, timeout_s: float = 5.0) -> bool:
    assert callable(work)
    runner = threading.Thread(target=work, daemon=True)
    runner.start()
    runner.join(timeout_s)
    return not runner.is_alive()


def test_a_fifo_as_an_epoch_record_is_unreadable_not_a_hang(share: Path) -> None:
    registry = EpochRegistry(share)
    registry.ensure_directory()
    os.mkfifo(registry.directory / "1")
    results: list[object] = []
    assert _finishes(lambda: results.append(registry.read(1)))
    assert results == [None]


def test_a_huge_or_deeply_nested_epoch_record_is_unreadable(share: Path) -> None:
    registry = EpochRegistry(share)
    registry.ensure_directory()
    (registry.directory / "1").write_text("[" * 100_000 + "]" * 100_000)
    (registry.directory / "2").write_bytes(b"{" + b" " * (1 << 20) + b"}")
    assert registry.read(1) is None
    assert registry.read(2) is None


def test_a_symlinked_lock_file_is_replaced_never_followed(share: Path, tmp_path: Path) -> None:
    """A symlink at the lock file's name: the holder record once went wherever it pointed.
    It is removed (its target untouched) and the lock taken on a file of the share's own, so
    a planted entry cannot keep the group without a master either."""
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    (share / LOCK_FILE_NAME).symlink_to(outside)
    with pytest.raises(OSError):
        read_holder_from_outside(share)  # a reader never follows it
    lock = ShareLock(share)
    assert lock.try_acquire()
    assert outside.read_text() == "precious\n"
    assert not (share / LOCK_FILE_NAME).is_symlink() and (share / LOCK_FILE_NAME).is_file()
    lock.close()


def test_a_fifo_as_the_lock_file_is_replaced_without_blocking(share: Path) -> None:
    os.mkfifo(share / LOCK_FILE_NAME)
    taken: list[bool] = []
    assert _finishes(lambda: taken.append(ShareLock(share).try_acquire()))
    assert taken == [True] and (share / LOCK_FILE_NAME).is_file()


def test_a_directory_as_the_lock_file_is_refused_with_the_reason(share: Path) -> None:
    (share / LOCK_FILE_NAME).mkdir()
    (share / LOCK_FILE_NAME / "keep").write_text("x")
    with pytest.raises(OSError, match="not a regular file; remove it"):
        ShareLock(share).try_acquire()


def test_a_planted_temporary_epoch_record_is_not_followed(share: Path, tmp_path: Path) -> None:
    registry = EpochRegistry(share)
    epoch = registry.claim_next({"node_id": "a"})
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    (registry.directory / f".{epoch}.{os.getpid()}.tmp").symlink_to(outside)
    registry.rewrite(epoch, {"node_id": "a", "outlasted": True})
    assert outside.read_text() == "precious\n"
    assert registry.read(epoch) == {"epoch": epoch, "node_id": "a", "outlasted": True}


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
    from primacy.locker.lockfile import LockMethod
    from primacy.locker.probe import check_share
    from primacy.nfs_profiles.profiles import load_profile
    from primacy.nfs_profiles.round_trips import time_fsync_round_trip

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
    from primacy.supervisor.registry import NodeEntry, NodeRegistry

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (share / directory).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OSError, match="not a directory of its own"):
        if directory == "epochs":
            EpochRegistry(share).ensure_directory()
        else:
            NodeRegistry(share).publish(
                NodeEntry("a", "h", 1, "127.0.0.1:1", "normal", "slave", None, 0)
            )
    assert list(elsewhere.iterdir()) == []


def test_a_directory_swapped_for_a_symlink_is_not_read_through_either(
    share: Path, tmp_path: Path
) -> None:
    """Reads too go relative to a descriptor of the directory opened without following a
    symlink: after a swap, listing and reading refuse instead of reading the planter's files."""
    from primacy.store.segments import list_segments
    from primacy.supervisor.registry import NodeEntry, NodeRegistry

    registry = EpochRegistry(share)
    registry.claim_next({"node_id": "a"})
    NodeRegistry(share).publish(NodeEntry("a", "h", 1, "127.0.0.1:1", "normal", "slave", None, 0))
    (share / "journal").mkdir()
    planted = tmp_path / "planted"
    for name in ("1", "2", "3", "a.json", "b.json", "0000000001-00000000000000000001.seg"):
        (planted / name).parent.mkdir(exist_ok=True)
        (planted / name).write_text("{}")
    for directory in ("epochs", "nodes", "journal"):
        (share / directory).rename(share / f"{directory}.moved")
        (share / directory).symlink_to(planted, target_is_directory=True)
    with pytest.raises(OSError, match="not a directory of its own"):
        registry.latest()
    with pytest.raises(OSError, match="not a directory of its own"):
        registry.exists(1)
    with pytest.raises(OSError, match="not a directory of its own"):
        NodeRegistry(share).entries()
    with pytest.raises(OSError, match="not a directory of its own"):
        list_segments(share / "journal")
