"""Planning a replay: which segment files to read, and what the store says applies to each.

Runs on the driver. For every segment it works out what a reader needs to
classify the segment's bytes the way recovery does: the length later fences
allow (``store.fences.FenceTable``) and whether it is its epoch's last segment
(where a crash can tear a batch). The plan is small and picklable, so each
segment becomes one Spark input partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path

from primacy.store import recovery
from primacy.store.checkpoint import Checkpoint, list_checkpoints
from primacy.store.fences import FenceTable
from primacy.store.segments import CHECKPOINT_DIR_NAME, epoch_tails, list_segments


@dataclass(frozen=True)
class SegmentPlan:
    """One segment file and what a reader needs to know to classify its bytes."""

    path: str
    epoch: int
    first_sequence: int
    fence_limit: int | None  # bytes later fences allow; 0: all fenced; None: no later fence
    is_epoch_tail: bool
    size_bytes: int

    @property
    def name(self) -> str:
        return Path(self.path).name


@dataclass(frozen=True)
class TimeWindow:
    """Records to keep by timestamp, in Unix nanoseconds; None leaves that side open."""

    since_unix_ns: int | None = None
    until_unix_ns: int | None = None

    def admits_batch(self, commit_unix_ns: int) -> bool:
        """False when every record of a batch committed then is certainly before ``since``.

        A record's timestamp (submit time) is never later than its batch's commit.
        """
        return self.since_unix_ns is None or commit_unix_ns >= self.since_unix_ns


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


def journal_dir(share: str | Path) -> Path:
    return Path(share) / "journal"


def read_fences(share: str | Path) -> FenceTable:
    """Every fence in the journal, as recovery knows them.

    A fence is the first batch of its epoch's first segment; the checkpoint a
    new master writes right after it keeps a copy, which recovery applies when
    the batch was damaged later. The replay must apply it too, or it would
    count as ``ok`` the stale writes recovery ignores.
    """
    table = FenceTable()
    for segment in list_segments(journal_dir(share)):
        # The store keeps this reader private to recovery; it is the one that knows
        # where a fence lives, so the replay uses it rather than a second copy.
        fence = recovery.read_first_batch_fence(segment)
        if fence is not None:
            table.add(*fence)
    table.merge(_checkpointed_fences(share))
    return table


def _checkpointed_fences(share: str | Path) -> FenceTable:
    """The fences of the newest checkpoint that reads back intact (it holds every older one)."""
    for path in list_checkpoints(journal_dir(share) / CHECKPOINT_DIR_NAME):
        try:
            return Checkpoint.from_bytes(path.read_bytes(), dedupe_window_messages=0).fences
        except (OSError, ValueError, KeyError, TypeError):
            continue  # damaged or of another version: recovery skips it as well
    return FenceTable()


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
