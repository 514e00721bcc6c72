"""Retention removes old sealed segments oldest first, never one still needed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from primacy.store.checkpoint import Checkpoint
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from primacy.store.retention import SegmentFacts, segments_to_remove
from primacy.store.segments import SegmentRef, list_segments


def facts(*rows: tuple[int, float, bool, int]) -> list[SegmentFacts]:
    return [
        SegmentFacts(SegmentRef(1, n, Path(f"s{n}")), size, modified, covered, pending)
        for n, (size, modified, covered, pending) in enumerate(rows)
    ]


def names(chosen: list[SegmentRef]) -> list[str]:
    return [segment.name for segment in chosen]


def test_old_segments_go_oldest_first_and_the_first_needed_one_stops_the_sweep() -> None:
    rows = facts((10, 0.0, True, 0), (10, 0.0, True, 1), (10, 0.0, True, 0), (10, 99.0, True, 0))
    assert names(
        segments_to_remove(rows, now_unix_s=100, max_age_s=50, max_bytes=None, current_segment="s3")
    ) == ["s0"]


def test_size_limit_removes_until_under_it_but_never_uncovered_or_current() -> None:
    rows = facts(
        (10, 90.0, True, 0), (10, 90.0, True, 0), (10, 90.0, False, 0), (10, 90.0, True, 0)
    )
    chosen = segments_to_remove(
        rows, now_unix_s=100, max_age_s=None, max_bytes=25, current_segment="s3"
    )
    assert names(chosen) == ["s0", "s1"]
    assert (
        segments_to_remove(
            rows, now_unix_s=100, max_age_s=None, max_bytes=1000, current_segment="s3"
        )
        == []
    )
    assert (
        segments_to_remove(
            rows[:1], now_unix_s=100, max_age_s=None, max_bytes=1, current_segment="s0"
        )
        == []
    )


def test_a_checkpoint_removes_acknowledged_segments_and_keeps_unacknowledged_ones(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    journal = tmp_path / "share" / "journal"
    store = open_store(segment_max_bytes=4096, retention_max_age_s=None, retention_max_bytes=8192)
    store.append_send("q", "keep", b"x" * 500).result(timeout=5)
    for i in range(60):
        store.append_send("q", f"m{i}", b"y" * 500).result(timeout=5)
        store.append_ack("q", f"m{i}").result(timeout=5)
    before = list_segments(journal)
    store.checkpoint().result(timeout=10)
    after = list_segments(journal)
    assert before[0] in after, "the segment holding an unacknowledged message was removed"
    assert len(after) == len(before)  # the sweep stops at the first needed segment
    store.append_ack("q", "keep").result(timeout=5)
    store.checkpoint().result(timeout=10)
    remaining = list_segments(journal)
    assert (
        len(remaining) < len(before) and sum(s.path.stat().st_size for s in remaining[:-1]) <= 8192
    )
    assert recover(journal).state.pending == {}


def test_a_checkpoint_lists_no_position_of_a_segment_retention_removed(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    """Positions of removed segments would make every checkpoint grow with uptime."""
    journal = tmp_path / "share" / "journal"
    store = open_store(segment_max_bytes=4096, retention_max_age_s=None, retention_max_bytes=8192)
    for round_ in range(3):
        for i in range(40):
            store.append_send("q", f"m{round_}-{i}", b"y" * 500).result(timeout=5)
            store.append_ack("q", f"m{round_}-{i}").result(timeout=5)
        store.checkpoint().result(timeout=10)
    path = store.checkpoint().result(timeout=10)  # after the last removal
    positions = Checkpoint.from_bytes(path.read_bytes(), dedupe_window_messages=1000).positions
    assert set(positions) == {segment.name for segment in list_segments(journal)}
    assert recover(journal).state.pending == {}
