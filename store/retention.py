"""Retention: which sealed segments may go, by age and total size, never one still needed.

A segment may be removed only if the newest checkpoint covers it completely
and it holds no unacknowledged message. Segments go strictly oldest first and
the first one that must stay stops the sweep, so a fence is never removed
while an older segment it limits remains.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from primacy.share.safe_io import fsync_directory, remove
from primacy.store import messages
from primacy.store.checkpoint import SegmentPosition
from primacy.store.config import StoreConfig
from primacy.store.segments import SegmentRef, list_segments


@dataclass(frozen=True)
class SegmentFacts:
    """What retention needs to know about one segment."""

    segment: SegmentRef
    size_bytes: int
    modified_unix_s: float
    covered_by_checkpoint: bool
    pending_messages: int


def segments_to_remove(
    facts: list[SegmentFacts],
    *,
    now_unix_s: float,
    max_age_s: float | None,
    max_bytes: int | None,
    current_segment: str,
) -> list[SegmentRef]:
    """The oldest-first prefix of ``facts`` (sorted oldest first) that limits allow removing."""
    total = sum(f.size_bytes for f in facts)
    chosen: list[SegmentRef] = []
    for fact in facts:
        removable = (
            fact.segment.name != current_segment
            and fact.covered_by_checkpoint
            and fact.pending_messages == 0
        )
        too_old = max_age_s is not None and now_unix_s - fact.modified_unix_s > max_age_s
        too_big = max_bytes is not None and total > max_bytes
        if not removable or not (too_old or too_big):
            break
        chosen.append(fact.segment)
        total -= fact.size_bytes
    return chosen


def retire_segments(
    config: StoreConfig,
    positions: Mapping[str, SegmentPosition],
    pending_by_segment: Mapping[str, int],
    *,
    current_segment: str,
) -> list[SegmentRef]:
    """Remove the segments retention lets go, given the newest checkpoint's positions and
    the pending messages per segment; returns them."""
    facts = []
    for segment in list_segments(config.journal_dir):
        try:
            info = segment.path.stat()
        except FileNotFoundError:
            continue
        position = positions.get(segment.name)
        facts.append(
            SegmentFacts(
                segment,
                info.st_size,
                info.st_mtime,
                covered_by_checkpoint=position is not None and position.complete,
                pending_messages=pending_by_segment.get(segment.name, 0),
            )
        )
    removed = segments_to_remove(
        facts,
        now_unix_s=time.time(),
        max_age_s=config.retention_max_age_s,
        max_bytes=config.retention_max_bytes,
        current_segment=current_segment,
    )
    for segment in removed:
        remove(segment.path)
        messages.log(logging.INFO, messages.SEGMENT_RETIRED, segment.name)
    if removed:
        fsync_directory(config.journal_dir)
    return removed
