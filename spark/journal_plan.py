"""Planning a replay: which segment files to read, and what the store says applies to each.

Runs on the driver. For every segment it works out what a reader needs to
classify the segment's bytes the way recovery does: the length later fences
allow (``store.fences.FenceTable``) and whether it is its epoch's last segment
(where a crash can tear a batch). The plan is small and picklable; a large
segment is split into byte ranges (``split_ranges``), each one Spark input
partition, so one segment's decoding spreads over several executors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING

from primacy.share.layout import journal_dir
from primacy.store import recovery
from primacy.store.checkpoint import newest_usable_checkpoint
from primacy.store.fences import FenceTable
from primacy.store.segments import epoch_tails, list_segments

if TYPE_CHECKING:  # numpy only for the readers: every node's CLI imports this module
    import numpy as np
    import numpy.typing as npt

# A segment larger than this is read by several tasks, one byte range each: small enough to
# spread a 64 MiB segment (the store's default size) over four executors, large enough that a
# task's fixed cost (opening the file, walking batch headers to its range) stays small.
RANGE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class SegmentPlan:
    """One segment file (or a byte range of it) and what a reader needs to classify its bytes.

    ``size_bytes`` is the segment's length when planned: readers read no further,
    so every range of a segment still being written sees the same bytes. A plan
    reads the rows whose byte offset (a batch's start, a damaged range's start)
    lies in ``[range_start, range_end)``; ``range_end`` None is the segment's end.
    """

    path: str
    epoch: int
    first_sequence: int
    fence_limit: int | None  # bytes later fences allow; 0: all fenced; None: no later fence
    is_epoch_tail: bool
    size_bytes: int
    range_start: int = 0
    range_end: int | None = None

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def whole_segment(self) -> bool:
        return self.range_start == 0 and self.range_end is None

    def holds(self, offset: int) -> bool:
        """Is a row starting at this byte offset one of this plan's?"""
        return self.range_start <= offset and (self.range_end is None or offset < self.range_end)

    def from_offset(self, offset: int) -> SegmentPlan:
        """The rows at or after ``offset``: what an incremental replay has not read yet."""
        return replace(self, range_start=offset, range_end=None)


def split_ranges(plan: SegmentPlan, range_bytes: int = RANGE_BYTES) -> list[SegmentPlan]:
    """The plan as consecutive byte ranges of about ``range_bytes``, the last open-ended.

    Rows are the same whatever the split: each belongs to the one range holding
    its start offset.
    """
    if range_bytes <= 0:
        raise OptionError(f"range_bytes must be a positive number of bytes, not {range_bytes}")
    end = plan.size_bytes if plan.range_end is None else min(plan.range_end, plan.size_bytes)
    starts = range(plan.range_start, max(end, plan.range_start + 1), range_bytes)
    ranges = [replace(plan, range_start=s, range_end=s + range_bytes) for s in starts]
    return [*ranges[:-1], replace(ranges[-1], range_end=plan.range_end)]


def plans_to_json(plans: Iterable[SegmentPlan]) -> str:
    """Plans as the data source's ``plan`` option carries them."""
    return json.dumps([asdict(plan) for plan in plans])


def plans_from_json(text: str) -> list[SegmentPlan]:
    try:
        return [SegmentPlan(**fields) for fields in json.loads(text)]
    except (ValueError, TypeError) as exc:
        raise OptionError(f"plan must be what plans_to_json writes: {exc}") from exc


@dataclass(frozen=True)
class TimeWindow:
    """Records to keep by timestamp, in Unix nanoseconds; None leaves that side open."""

    since_unix_ns: int | None = None
    until_unix_ns: int | None = None

    def admits_batches(self, commit_unix_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_] | None:
        """False for a batch whose every record is certainly before ``since``, from the
        batches' commit times (a record's timestamp, its submit time, is never later);
        None when every batch is admitted."""
        if self.since_unix_ns is None:
            return None
        return commit_unix_ns >= self.since_unix_ns


ALL_TIME = TimeWindow()
_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class OptionError(ValueError):
    """An option of the journal data source that cannot be understood."""


def parse_time(text: str) -> int:
    """ISO 8601 (no offset: UTC) or Unix seconds, as Unix nanoseconds."""
    try:
        return int(Decimal(text) * 1_000_000_000)  # Decimal: a float loses the nanoseconds
    except (InvalidOperation, ValueError, OverflowError):  # not a number, or nan/inf
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise OptionError(
            f"{text!r} is not a time; give ISO 8601 like 2026-11-22T10:00:00Z or Unix seconds"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _UNIX_EPOCH) // timedelta(microseconds=1) * 1000


def read_fences(share: str | Path) -> FenceTable:
    """Every fence in the journal, as recovery applies them (``recovery.fences_in_force``).

    A fence is the first batch of its epoch's first segment; the checkpoint a new
    master writes right after it keeps a copy, which recovery applies when the batch
    was damaged later. The replay must apply the same, or it would count as ``ok``
    the stale writes recovery ignores: the same checkpoint (the store's one reader
    of the newest usable one), the same fence batches.
    """
    journal = journal_dir(share)
    segments = list_segments(journal)
    skipped: list[str] = []  # recovery logs them; the replay's report has its own damage
    checkpoint = newest_usable_checkpoint(journal, segments, 0, skipped)
    return recovery.fences_in_force(segments, checkpoint)


def plan_segments(share: str | Path, epochs: frozenset[int] | None = None) -> list[SegmentPlan]:
    """The segments to replay in (epoch, first sequence) order, optionally only some epochs.

    Fences and epoch tails are worked out over the whole journal even when only
    some epochs are read, so a segment is classified the same either way.
    """
    segments = list_segments(journal_dir(share))
    fences = read_fences(share)
    tails = epoch_tails(segments)
    plans = []
    for segment in segments:
        if epochs is not None and segment.epoch not in epochs:
            continue
        try:
            size = segment.path.stat().st_size
        except FileNotFoundError:
            continue  # removed by retention since the listing
        plans.append(
            SegmentPlan(
                path=str(segment.path),
                epoch=segment.epoch,
                first_sequence=segment.first_sequence,
                fence_limit=fences.limit_for(segment.epoch, segment.first_sequence),
                is_epoch_tail=segment.name in tails,
                size_bytes=size,
            )
        )
    return plans
