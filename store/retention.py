"""Retention: which sealed segments may go, by age and total size, never one still needed.

A segment may be removed only if the newest checkpoint covers it completely
and it holds no unacknowledged message. Segments go strictly oldest first and
the first one that must stay stops the sweep, so a fence is never removed
while an older segment it limits remains.
"""

from __future__ import annotations

from dataclasses import dataclass

from primacy.store.segments import SegmentRef


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
