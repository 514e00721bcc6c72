"""The journal tools behind ``primacy journal``: verify, dump, stats. Read-only, full scans."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primacy.share.layout import journal_dir
from primacy.store import format as fmt
from primacy.store import payloads
from primacy.store.recovery import RecoveryReport, recover
from primacy.store.segments import BatchAt, Damage, DamageKind, SegmentRef


@dataclass(frozen=True)
class JournalStats:
    """Figures over the whole journal of one share."""

    segments: int
    epochs: tuple[int, ...]
    records: int
    bytes: int
    last_sequence: int
    pending_messages: int
    fenced_writes: int
    damaged_batches: int
    torn_tails: int


@dataclass(frozen=True)
class VerifyResult:
    """``ok`` is False if any batch is damaged or the checkpoint disagrees with a full scan."""

    ok: bool
    report: RecoveryReport
    problems: tuple[str, ...]


def verify(share: Path) -> VerifyResult:
    """Check every batch (each record read in full), and that recovering from the checkpoint
    equals a full scan."""
    undecodable: list[Damage] = []

    def read_in_full(segment: SegmentRef, batch: BatchAt, view: memoryview) -> None:
        try:
            for record in fmt.iter_records(view):
                record_as_dict(record, segment.name, batch.offset)
        except fmt.FormatError as exc:
            undecodable.append(
                Damage(DamageKind.DAMAGED_BATCH, segment.name, batch.offset, len(view), str(exc))
            )

    full = recover(journal_dir(share), use_checkpoint=False, visit=read_in_full, log=False)
    quick = recover(journal_dir(share), use_checkpoint=True, log=False)
    problems = [
        f"{d.kind.value} in {d.segment} at byte {d.offset} ({d.length} bytes): {d.reason}"
        for d in (*full.report.damaged, *undecodable)
    ]
    if full.state.summary() != quick.state.summary():
        problems.append(
            "recovering from the newest checkpoint gives a different state than a full scan"
        )
    problems += [f"checkpoint skipped: {name}" for name in quick.report.skipped_checkpoints]
    return VerifyResult(not problems, full.report, tuple(problems))


def stats(share: Path) -> JournalStats:
    epochs: set[int] = set()

    def note_epoch(segment: SegmentRef, _batch: BatchAt, _view: memoryview) -> None:
        epochs.add(segment.epoch)

    result = recover(journal_dir(share), use_checkpoint=False, visit=note_epoch, log=False)
    epochs.update(s.epoch for s in result.segments)
    return JournalStats(
        segments=result.report.segments,
        epochs=tuple(sorted(epochs)),
        records=result.report.records_applied,
        bytes=result.report.bytes_read,
        last_sequence=result.state.last_sequence,
        pending_messages=result.state.pending_count(),
        fenced_writes=result.report.fenced_records,
        damaged_batches=len(result.report.damaged),
        torn_tails=len(result.report.torn_tails),
    )


def dump(
    share: Path,
    emit: Callable[[dict[str, Any]], None],
    from_sequence: int = 0,
    on_undecodable: Callable[[Damage], None] | None = None,
) -> RecoveryReport:
    """Call ``emit`` with every valid, unfenced record from ``from_sequence`` on, in order.

    The report lists the damage recovery found; a batch whose headers or payloads turn
    out not to be ours only when read in full goes to ``on_undecodable``, not dumped.
    """

    def visit(segment: SegmentRef, batch: BatchAt, view: memoryview) -> None:
        if batch.header.last_sequence < from_sequence:
            return
        try:
            rows = [
                record_as_dict(record, segment.name, batch.offset)
                for record in fmt.iter_records(view)
                if record.sequence >= from_sequence
            ]
        except fmt.FormatError as exc:
            if on_undecodable is not None:
                on_undecodable(
                    Damage(
                        DamageKind.DAMAGED_BATCH, segment.name, batch.offset, len(view), str(exc)
                    )
                )
            return
        for row in rows:
            emit(row)

    return recover(journal_dir(share), use_checkpoint=False, visit=visit, log=False).report


def record_as_dict(record: fmt.Record, segment: str, batch_offset: int) -> dict[str, Any]:
    """A JSON-friendly view of one record; the payload as UTF-8 text if it is, else base64."""
    body: dict[str, Any] = {
        "sequence": record.sequence,
        "epoch": record.epoch,
        "timestamp_unix_ns": record.timestamp_unix_ns,
        "type": record.record_type.name,
        "segment": segment,
        "batch_offset": batch_offset,
    }
    if record.record_type in (fmt.RecordType.SEND, fmt.RecordType.ACK, fmt.RecordType.DELIVER):
        body["destination"] = record.destination
        body["message_id"] = record.message_id
    elif record.record_type in (fmt.RecordType.SUBSCRIBE, fmt.RecordType.UNSUBSCRIBE):
        body["destination"] = record.destination  # the topic
        body["subscription"] = record.message_id  # the durable subscription's queue name
    if record.record_type is fmt.RecordType.SEND:
        body["headers"] = record.headers
        try:
            body["payload"] = record.payload.decode()
        except UnicodeDecodeError:
            body["payload_base64"] = base64.b64encode(record.payload).decode()
    elif record.record_type is fmt.RecordType.CONTROL:
        body["event"] = payloads.decode_control(record.payload)
    elif record.record_type is fmt.RecordType.FENCE:
        body["fence"] = [
            {"epoch": e.epoch, "first_sequence": e.first_sequence, "length": e.length}
            for e in payloads.decode_fence(record.payload)
        ]
    return body
