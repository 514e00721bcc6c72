"""Names the store writes and directories it uses are never followed out of the share (found by
trying: a symlink planted at a quarantine copy's name got the damaged bytes written into a file
elsewhere, and a symlinked ``quarantine/`` or ``journal/`` was followed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from primacy.store.journal import JournalStore
from primacy.store.segments import list_segments
from tests.store.test_damage import batch_offsets, flip_bit, write_batches


def _damaged_journal(open_store: Callable[..., JournalStore], journal: Path) -> tuple[str, int]:
    """A sealed epoch with one damaged batch: what a new master quarantines when it opens."""
    store = open_store()
    write_batches(store, 6)
    store.close()
    segment = list_segments(journal)[-1].path
    offset = batch_offsets(segment)[3]
    flip_bit(segment, offset + 100)
    return segment.name, offset


def test_a_symlink_at_the_quarantine_copy_name_is_not_followed(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    journal = tmp_path / "share" / "journal"
    segment, offset = _damaged_journal(open_store, journal)
    outside = tmp_path / "outside.txt"
    outside.write_text("not the journal's")
    (journal / "quarantine").mkdir()
    planted = journal / "quarantine" / f"{segment}.{offset}.damaged_batch.tmp"
    planted.symlink_to(outside)

    successor = open_store(epoch=2)
    assert successor.stats().damaged_batches_at_open == 1
    assert outside.read_text() == "not the journal's"
    copy = journal / "quarantine" / f"{segment}.{offset}.damaged_batch"
    assert copy.is_file() and not copy.is_symlink()


def test_a_symlinked_quarantine_directory_is_not_followed_and_the_store_opens(
    open_store: Callable[..., JournalStore], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = tmp_path / "share" / "journal"
    _damaged_journal(open_store, journal)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (journal / "quarantine").symlink_to(elsewhere, target_is_directory=True)

    successor = open_store(epoch=2)  # a copy for inspection must not keep a master out
    assert successor.stats().damaged_batches_at_open == 1
    assert list(elsewhere.iterdir()) == []
    assert "no copy kept" in caplog.text and "not a directory of its own" in caplog.text


def test_a_symlinked_journal_directory_is_refused_with_the_reason(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    share = tmp_path / "share"
    share.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (share / "journal").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OSError, match="not a directory of its own"):
        open_store()
    assert list(elsewhere.iterdir()) == []


def test_a_journal_directory_swapped_for_a_symlink_while_open_fails_the_next_segment(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    """Checked before every new segment: a swap while a master writes stops its journal
    (it demotes and says why) instead of writing segments through the symlink."""
    store = open_store(segment_max_bytes=4096)
    store.append_send("q", "m0", b"x" * 100).result(timeout=5)
    journal = tmp_path / "share" / "journal"
    journal.rename(tmp_path / "share" / "journal.moved")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    journal.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(Exception, match="not a directory of its own"):
        for number in range(1, 100):  # past segment_max_bytes: a rollover creates a file
            store.append_send("q", f"m{number}", b"x" * 100).result(timeout=5)
    assert list(elsewhere.iterdir()) == []
