"""Recovery: rebuild the journal state from the newest valid checkpoint and the records after it.

Reads every segment in (epoch, first sequence) order, applies every fence,
and applies the valid records in sequence order. Torn tails, damaged batches
and fenced writes are reported (and logged with their stable codes); none of
them stops the store from opening. A segment of a format version this release
does not know does: its records cannot be read, and skipping them could lose
acknowledged messages (``UnsupportedJournal``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from primacy.share.layout import QUARANTINE_DIR_NAME
from primacy.share.safe_io import create_new_file, exists_in, real_directory, replace_within
from primacy.store import format as fmt
from primacy.store import messages, payloads
from primacy.store.checkpoint import Checkpoint, SegmentPosition, newest_usable_checkpoint
from primacy.store.errors import UnsupportedJournal
from primacy.store.fences import FenceTable
from primacy.store.segments import (
    NO_SCAN,
    SCAN_CHUNK_BYTES,
    BatchAt,
    Damage,
    DamageKind,
    SegmentRef,
    SegmentScan,
    SegmentSource,
    check_batch_at,
    epoch_tails,
    iter_batches,
    list_segments,
    open_segment,
    read_segment_head,
    scan_segment,
)
from primacy.store.state import JournalState

BatchVisitor = Callable[[SegmentRef, BatchAt, memoryview], None]


@dataclass(frozen=True)
class FencedWrite:
    """Bytes of a segment past the fence that applies to it: writes that never counted."""

    segment: str
    offset: int
    length: int
    batches: int
    records: int


@dataclass(frozen=True)
class RecoveryReport:
    """What recovery read, and everything it could not use."""

    segments: int
    segments_read: int
    batches_read: int
    records_applied: int
    bytes_read: int
    torn_tails: tuple[Damage, ...]
    damaged: tuple[Damage, ...]
    fenced: tuple[FencedWrite, ...]
    checkpoint: str | None
    skipped_checkpoints: tuple[str, ...]
    duration_s: float

    @property
    def fenced_records(self) -> int:
        return sum(f.records for f in self.fenced)


@dataclass
class RecoveryResult:
    """The recovered state plus what a writer needs to continue after it."""

    # What the records say; once a JournalStore opens on it, its live state (the writer
    # applies each commit to it), not a snapshot.
    state: JournalState
    report: RecoveryReport
    fences: FenceTable
    segments: list[SegmentRef]
    # End of the last valid batch recovery applied, per segment: what a new fence lists.
    valid_ends: dict[str, int] = field(default_factory=dict)


def recover(
    journal_dir: Path,
    *,
    dedupe_window_messages: int = 100_000,
    use_checkpoint: bool = True,
    quarantine: bool = False,
    visit: BatchVisitor | None = None,
    log: bool = True,
    start: Checkpoint | None = None,
    fences_read: Collection[str] = (),
) -> RecoveryResult:
    """Recover the state of the journal in ``journal_dir`` (read-only unless ``quarantine``).

    ``quarantine`` copies damaged batches into ``journal/quarantine/``;
    ``visit`` is called for every valid, unfenced batch read (tools use it).
    ``start``: a checkpoint held in memory to start from instead of the newest on the share
    (a follower's state, ``store/follower.py``); it becomes the state returned.
    ``fences_read``: segments of ``start`` whose first batch its fence table already holds
    (a follower read past it), so their fence is not read a second time.
    """
    started = time.perf_counter()
    segments = list_segments(journal_dir)
    skipped: list[str] = []
    checkpoint = (
        start
        if start is not None
        else newest_usable_checkpoint(journal_dir, segments, dedupe_window_messages, skipped)
        if use_checkpoint
        else None
    )
    fences = fences_in_force(segments, checkpoint, fences_read if start is not None else ())
    if checkpoint is None:
        state = JournalState(dedupe_window_messages)
        positions: dict[str, SegmentPosition] = {}
    else:
        state, positions = checkpoint.state, checkpoint.positions
    tails = epoch_tails(segments)
    torn: list[Damage] = []
    damaged: list[Damage] = []
    fenced: list[FencedWrite] = []
    valid_ends: dict[str, int] = {}
    counts = {"segments": 0, "batches": 0, "records": 0, "bytes": 0}
    for segment in segments:
        position = positions.get(segment.name)
        if position is not None and position.complete and not _grew(segment, position):
            valid_ends[segment.name] = position.offset
            continue
        segment_name = segment.name  # a pathlib property: not once per record
        # A covered segment that grew since has bytes written after its epoch was
        # fenced (a stale master): scan them so they are reported, never applied.
        start_offset = position.offset if position else 0
        with open_segment(segment.path, scan_from=start_offset) as source:
            scan = scan_segment(
                segment,
                source,
                start_offset=start_offset,
                fence_limit=fences.limit_for(segment.epoch, segment.first_sequence),
                is_epoch_tail=segment.name in tails,
            )
            _refuse_unknown_versions(scan)
            counts["segments"] += 1
            valid_ends[segment.name] = scan.valid_end if scan.header else 0
            for damage in scan.damage:
                (torn if damage.kind is DamageKind.TORN_TAIL else damaged).append(damage)
                if quarantine and damage.kind is not DamageKind.TORN_TAIL:
                    _quarantine(journal_dir, segment, damage, source)
            if scan.fenced_offset is not None:
                fenced.append(
                    FencedWrite(
                        segment.name,
                        scan.fenced_offset,
                        source.size - scan.fenced_offset,
                        scan.fenced_batches,
                        scan.fenced_records,
                    )
                )
            for batch, view in iter_batches(source, scan):
                try:
                    records = fmt.record_keys(view)
                except fmt.FormatError as exc:  # whole (its CRC holds) but not written by us
                    damage = Damage(
                        DamageKind.DAMAGED_BATCH, segment.name, batch.offset, len(view), str(exc)
                    )
                    damaged.append(damage)
                    if quarantine:
                        _quarantine(journal_dir, segment, damage, source)
                    continue
                counts["batches"] += 1
                if visit is not None:
                    visit(segment, batch, view)
                counts["records"] += len(records)
                for record_type, sequence, destination, message_id in records:
                    state.apply(
                        record_type, sequence, destination, message_id, segment_name, batch.offset
                    )
            counts["bytes"] += source.bytes_read
    report = RecoveryReport(
        segments=len(segments),
        segments_read=counts["segments"],
        batches_read=counts["batches"],
        records_applied=counts["records"],
        bytes_read=counts["bytes"],
        torn_tails=tuple(torn),
        damaged=tuple(damaged),
        fenced=tuple(fenced),
        checkpoint=_describe(checkpoint, followed=start is not None),
        skipped_checkpoints=tuple(skipped),
        duration_s=time.perf_counter() - started,
    )
    if log:
        log_report(report)
    return RecoveryResult(state, report, fences, segments, valid_ends)


def fences_in_force(
    segments: list[SegmentRef], checkpoint: Checkpoint | None, fences_read: Collection[str] = ()
) -> FenceTable:
    """Every fence that applies to ``segments``: the checkpoint's table (which becomes the
    table returned), and the fence batch of each segment it does not cover whole, unless
    ``fences_read`` names it (its first batch was read into the table already).

    What recovery applies, and so what the replay applies (``spark/journal_plan.py``).
    """
    fences = FenceTable() if checkpoint is None else checkpoint.fences
    covered = {} if checkpoint is None else checkpoint.positions
    for segment in segments:
        position = covered.get(segment.name)
        if position is not None and (position.complete or segment.name in fences_read):
            continue  # its fence, if any, is in the checkpoint's fence table already
        fence = read_first_batch_fence(segment)
        if fence is not None:
            fences.add(*fence)
    return fences


def _refuse_unknown_versions(scan: SegmentScan) -> None:
    """A segment of a newer format holds records (maybe acknowledged ones, maybe a fence) this
    release cannot read: skipping it would lose them, so nothing is recovered."""
    for damage in scan.damage:
        if damage.kind is DamageKind.UNSUPPORTED_VERSION:
            detail = (
                f"{damage.segment}: {damage.reason}. This node cannot read the journal and "
                "will not serve; upgrade it to the release that wrote the segment"
            )
            messages.log(logging.CRITICAL, messages.UNSUPPORTED_SEGMENT, detail)
            raise UnsupportedJournal(messages.text(messages.UNSUPPORTED_SEGMENT, detail))


def _describe(checkpoint: Checkpoint | None, followed: bool = False) -> str | None:
    if checkpoint is None:
        return None
    if followed:
        return f"followed state at sequence {checkpoint.state.last_sequence}"
    return f"checkpoint at sequence {checkpoint.state.last_sequence} (epoch {checkpoint.epoch})"


def log_report(report: RecoveryReport) -> None:
    """Log every finding once, each with its stable code."""
    for damage in report.torn_tails:
        messages.log(
            logging.WARNING,
            messages.TORN_TAIL_CUT,
            f"{damage.segment} from byte {damage.offset} ({damage.length} bytes, {damage.reason})",
        )
    for damage in report.damaged:
        code = (
            messages.SEGMENT_HEADER_DAMAGED
            if damage.kind is DamageKind.BAD_SEGMENT_HEADER
            else messages.DAMAGED_BATCH_QUARANTINED
        )
        messages.log(
            logging.ERROR,
            code,
            f"{damage.segment} bytes {damage.offset}..{damage.offset + damage.length} "
            f"({damage.reason}); its records are not recovered, a copy is in quarantine/",
        )
    for write in report.fenced:
        if write.records or write.length:
            messages.log(
                logging.WARNING,
                messages.TRANSACTION_LOSS_AVERTED,
                f"{write.records} record(s) in {write.batches} batch(es) of {write.segment} "
                f"past its fence at byte {write.offset} were written by a stale master "
                "and are ignored",
            )
    for name in report.skipped_checkpoints:
        messages.log(logging.WARNING, messages.CHECKPOINT_SKIPPED, name)


def _grew(segment: SegmentRef, position: SegmentPosition) -> bool:
    try:
        return segment.path.stat().st_size > position.offset
    except OSError:
        return False  # gone or unreadable: nothing to scan


def read_first_batch_fence(segment: SegmentRef) -> tuple[int, list[payloads.FenceEntry]] | None:
    """The fence an epoch's first segment opens with, if this segment has one."""
    try:
        with open_segment(segment.path, scan_from=NO_SCAN) as source:
            header = fmt.decode_segment_header(read_segment_head(source))
            status, batch = check_batch_at(source, header.header_len)
            if status is not fmt.BatchStatus.OK or batch is None:
                return None
            view = memoryview(source.read(header.header_len, batch.batch_len))
    except (OSError, fmt.FormatError):
        return None
    try:
        # Most segments open with a batch of messages: their keys say so without copying
        # every payload (recovery and the replay's planner ask this of each segment).
        if all(kind is not fmt.RecordType.FENCE for kind, _, _, _ in fmt.record_keys(view)):
            return None
        for record in fmt.iter_records(view):
            if record.record_type is fmt.RecordType.FENCE:
                return record.epoch, payloads.decode_fence(record.payload)
    except fmt.FormatError:
        return None  # not a batch we wrote; the scan reports it as damage
    return None


def _quarantine(
    journal_dir: Path, segment: SegmentRef, damage: Damage, source: SegmentSource
) -> None:
    """Keep a copy of damaged bytes for inspection; the segment itself is never rewritten.
    A copy that cannot be made (a symlink planted as ``quarantine/``, a full share) is
    logged and skipped: it is for inspection only, and must not keep a master from opening."""
    target = (
        journal_dir / QUARANTINE_DIR_NAME / f"{segment.name}.{damage.offset}.{damage.kind.value}"
    )
    try:
        real_directory(target.parent)
        if exists_in(target):
            return
        temporary = target.with_suffix(target.suffix + ".tmp")
        with os.fdopen(create_new_file(temporary), "wb") as copy:
            end = damage.offset + damage.length
            for start in range(damage.offset, end, SCAN_CHUNK_BYTES):
                copy.write(source.read(start, min(SCAN_CHUNK_BYTES, end - start)))
        replace_within(temporary, target)
    except OSError as exc:
        detail = f"{segment.name} at {damage.offset}: no copy kept ({exc})"
        messages.log(logging.WARNING, messages.DAMAGED_BATCH_QUARANTINED, detail)
