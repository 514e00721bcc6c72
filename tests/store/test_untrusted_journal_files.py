"""Planted files with journal names neither hang nor crash recovery; they are skipped and said."""

from __future__ import annotations

import logging
import os
import struct
import threading
import tracemalloc
from pathlib import Path

import crc32c
import pytest

from primacy.share.layout import CHECKPOINTS_DIR_NAME, QUARANTINE_DIR_NAME
from primacy.store import messages
from primacy.store.checkpoint import CHECKPOINT_MAGIC, CHECKPOINT_VERSION, checkpoint_name
from primacy.store.config import StoreConfig
from primacy.store.errors import StaleEpoch
from primacy.store.journal import JournalStore
from primacy.store.segments import segment_name
from tests.harness.crafted_files import (
    HOSTILE_NUMBERS,
    PLACES,
    checkpoint_body,
    checkpoint_bytes,
    plant_checkpoint,
    plant_far_epoch_segment,
)


def _open_within(config: StoreConfig, epoch: int, timeout_s: float = 20.0) -> JournalStore:
    opened: list[JournalStore | BaseException] = []

    def open_it() -> None:
        try:
            opened.append(JournalStore.open(config, epoch=epoch, fencing_check=lambda: None))
        except BaseException as exc:
            opened.append(exc)

    runner = threading.Thread(target=open_it, daemon=True)
    runner.start()
    runner.join(timeout_s)
    assert not runner.is_alive(), "opening the journal hung"
    assert isinstance(opened[0], JournalStore), opened[0]
    return opened[0]


def _checkpoint_bytes(body: bytes) -> bytes:
    header = struct.Struct("<8sIIQ")
    return header.pack(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, crc32c.crc32c(body), len(body)) + body


def test_a_crc_valid_checkpoint_of_foreign_shape_is_skipped(share: Path) -> None:
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_send("/queue/q", "m1", b"kept", {}).result()
    checkpoints = config.journal_dir / CHECKPOINTS_DIR_NAME
    checkpoints.mkdir(exist_ok=True)
    (checkpoints / checkpoint_name(10**6, 1)).write_bytes(_checkpoint_bytes(b"[" * 200_000))
    (checkpoints / checkpoint_name(10**6 + 1, 1)).write_bytes(_checkpoint_bytes(b'{"epoch": []}'))
    with _open_within(config, epoch=2) as store:
        assert store.stats().pending_messages == 1
        assert len(store.recovery.report.skipped_checkpoints) == 2


def test_fifos_named_like_journal_files_are_not_opened(share: Path) -> None:
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_send("/queue/q", "m1", b"kept", {}).result()
    os.mkfifo(config.journal_dir / segment_name(1, 10**6))
    (config.journal_dir / CHECKPOINTS_DIR_NAME).mkdir(exist_ok=True)
    os.mkfifo(config.journal_dir / CHECKPOINTS_DIR_NAME / checkpoint_name(10**7, 1))
    with _open_within(config, epoch=2) as store:
        assert store.stats().pending_messages == 1


def test_a_planted_segment_name_of_a_later_epoch_does_not_block_opening(share: Path) -> None:
    # Found by tests/integration/test_random_planting.py: every new master refused to open
    # ("the journal already has segments of epoch N or later") and the group had none.
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_send("/queue/q", "m1", b"kept", {}).result()
    planted = segment_name(804_549_931_977, 733_687_251_514_855)
    (config.journal_dir / planted).write_bytes(b'{"role": "master"}')
    with _open_within(config, epoch=2) as store:
        assert store.stats().pending_messages == 1
        report = store.recovery.report  # reported: as a torn tail (too short for a header)
        assert planted in {d.segment for d in (*report.damaged, *report.torn_tails)}


def test_a_checkpoint_far_larger_than_the_journal_is_skipped_unread(share: Path) -> None:
    """A checkpoint is read whole and parsed; a planted one of 200 MiB (sparse, with a valid
    header claiming it all) would cost that much memory. It is skipped, named, not read."""
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_send("/queue/q", "m1", b"kept", {}).result()
    checkpoints = config.journal_dir / CHECKPOINTS_DIR_NAME
    checkpoints.mkdir(exist_ok=True)
    huge = checkpoints / checkpoint_name(10**6, 1)
    length = 200 * 2**20
    with huge.open("wb") as handle:
        handle.write(struct.pack("<8sIIQ", CHECKPOINT_MAGIC, CHECKPOINT_VERSION, 0, length))
        handle.truncate(24 + length)
    with _open_within(config, epoch=2) as store:
        assert store.stats().pending_messages == 1
        (skipped,) = [s for s in store.recovery.report.skipped_checkpoints if huge.name in s]
        assert "not read" in skipped


def test_a_checkpoint_is_read_with_memory_of_its_own_size(share: Path) -> None:
    """The bound on a checkpoint's size grows with the journal (16 times it, plus the dedupe
    window's 64 MiB); reading up to that bound reserved it all at every takeover, so a
    journal of a few GB made every new master fail with MemoryError. Opening a small
    journal with a checkpoint now costs far less than the bound."""
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        for n in range(100):
            store.append_send("/queue/q", f"m{n}", b"kept", {}).result()
        store.checkpoint().result()
    tracemalloc.start()
    try:
        with _open_within(config, epoch=2) as store:
            assert store.recovery.report.checkpoint is not None
            assert store.stats().pending_messages == 100
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"opening took {peak / 2**20:.0f} MiB at its peak"


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("number", HOSTILE_NUMBERS)
def test_a_crc_valid_checkpoint_with_a_number_out_of_range_is_skipped(
    share: Path, number: str, place: str
) -> None:
    """Issue 27: ``1e999`` as the epoch raised OverflowError out of recovery, and no node could
    open the journal; 10**30 as the last sequence was taken, and the first write failed."""
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_send("/queue/q", "m1", b"kept", {}).result()
    planted = plant_checkpoint(share, number, place)
    with _open_within(config, epoch=2) as store:
        assert store.stats().pending_messages == 1
        assert store.append_send("/queue/q", "m2", b"after", {}).result() > 1  # a sequence
        (skipped,) = store.recovery.report.skipped_checkpoints
        assert skipped.startswith(planted.name)


def test_the_crafted_checkpoint_is_usable_but_for_its_number(share: Path) -> None:
    """The test above proves something only if the same body with an ordinary number is read."""
    from primacy.store.checkpoint import Checkpoint

    checkpoint = Checkpoint.from_bytes(checkpoint_bytes(checkpoint_body("7", "epoch")), 10)
    assert checkpoint.epoch == 7 and checkpoint.state.pending_count() == 1


def _segment_of_epoch_one(share: Path) -> StoreConfig:
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_send("/queue/q", "m1", b"kept", {}).result()
    return config


def test_a_segment_of_an_epoch_nobody_claimed_is_set_aside(
    share: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27: a 56-byte segment of epoch 999999 with a valid header stopped every new
    master ("the journal already has segments of epoch 2 or later"); nothing asked epochs/."""
    config = _segment_of_epoch_one(share)
    planted = plant_far_epoch_segment(share)
    content = planted.read_bytes()
    claimed = {1, 2}
    with caplog.at_level(logging.WARNING, "primacy.store"):
        store = JournalStore.open(
            config, epoch=2, fencing_check=lambda: None, epoch_claimed=claimed.__contains__
        )
    with store:
        assert store.stats().pending_messages == 1
    assert not planted.exists()
    (kept,) = (config.journal_dir / QUARANTINE_DIR_NAME).iterdir()
    assert kept.read_bytes() == content
    assert messages.UNCLAIMED_EPOCH_SEGMENT in caplog.text


@pytest.mark.parametrize("cross_check", ["claimed", "lookup fails", "not asked"])
def test_a_segment_of_a_later_epoch_still_stops_a_stale_master(
    share: Path, cross_check: str
) -> None:
    """The set-aside rests on positive proof only: a later epoch that was claimed, a lookup
    that fails, or no way to ask, and the stale master refuses, touching nothing."""
    config = _segment_of_epoch_one(share)
    later = plant_far_epoch_segment(share, epoch=3)

    def claimed(epoch: int) -> bool:
        if cross_check == "lookup fails":
            raise OSError(5, "EIO")
        return True

    asked = None if cross_check == "not asked" else claimed
    with pytest.raises((StaleEpoch, OSError)):
        JournalStore.open(config, epoch=2, fencing_check=lambda: None, epoch_claimed=asked)
    assert later.exists()
    assert not (config.journal_dir / QUARANTINE_DIR_NAME).exists()


def test_an_unclaimed_segment_is_set_aside_past_a_planted_quarantine_symlink(
    share: Path, tmp_path: Path
) -> None:
    """A symlink planted as ``journal/quarantine`` must not turn the set-aside back into a
    refusal: the segment is renamed in the journal directory to a name no segment has."""
    config = _segment_of_epoch_one(share)
    planted = plant_far_epoch_segment(share)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (config.journal_dir / QUARANTINE_DIR_NAME).symlink_to(elsewhere)
    store = JournalStore.open(
        config, epoch=2, fencing_check=lambda: None, epoch_claimed={1, 2}.__contains__
    )
    with store:
        assert store.stats().pending_messages == 1
    assert not planted.exists() and list(elsewhere.iterdir()) == []
    assert [p.name for p in config.journal_dir.glob(f"{planted.name}.*.unclaimed")]
