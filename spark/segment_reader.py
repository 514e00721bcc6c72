"""Reading one segment file into Arrow record batches, every byte accounted for by a status.

This is the data source's reader function, free of Spark so it can be tested
and benchmarked alone. Everything it knows of the format is the store's read
side: a segment (or byte range) whose every batch checks clean is checked at
once (``store.columns.clean_batches``); any other is classified by the store
(``scan_segment``, with the fence limit and epoch-tail flag from the plan).
The store's column decoder decodes groups of valid batches
(``store.decoder.decode_batches``), checking their records as recovery does: a
batch whose CRC holds but whose records are not ours comes back as a fault,
with recovery's reason, and becomes a ``damaged_batch`` row. This module only
adds where each row came from and its status, and casts to the types Spark
takes. There is no Python loop per record, and none per batch on a clean
segment.

Statuses: ``ok`` (a record recovery applies), ``fenced`` (a stale master's
write past a fence; the record is decoded but never counted), and the damage
kinds of ``store.segments.DamageKind`` (``damaged_batch``, ``torn_tail``,
``bad_segment_header``, ``unsupported_version``) as one row per unusable byte
range, whose record columns are null: bytes that fail their CRC cannot be
trusted, and a format this release does not know cannot be read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from primacy.spark.journal_plan import ALL_TIME, SegmentPlan, TimeWindow
from primacy.spark.planned_bytes import READ_BUFFERS, PlannedBytes
from primacy.store import format as fmt
from primacy.store.columns import Batches, clean_batches
from primacy.store.decoder import Fault, decode_batches
from primacy.store.segments import (
    SEGMENT_HEADER_MAX_BYTES,
    Damage,
    DamageKind,
    SegmentRef,
    SegmentScan,
    batches_from,
    open_journal_file,
    scan_segment,
)

STATUS_OK = "ok"
STATUS_FENCED = "fenced"

_TIMESTAMP = pa.timestamp("us", tz="UTC")  # Spark's TimestampType in Arrow
_NANOSECONDS = pa.timestamp("ns", tz="UTC")  # a record header's
# Journal batches are grouped into Arrow batches of about this many bytes: few enough
# Python calls per record, and batches large enough for Spark's Arrow transfer.
ROWS_GROUP_BYTES = 8 * 1024 * 1024

RECORDS_SCHEMA = pa.schema(
    [
        pa.field("segment", pa.string()),
        pa.field("batch_offset", pa.int64()),
        pa.field("status", pa.string()),
        pa.field("detail", pa.string()),
        pa.field("node", pa.string()),
        pa.field("epoch", pa.int64()),
        pa.field("sequence", pa.int64()),
        pa.field("timestamp", _TIMESTAMP),
        pa.field("commit_time", _TIMESTAMP),
        pa.field("type", pa.string()),
        pa.field("destination", pa.string()),
        pa.field("message_id", pa.string()),
        pa.field("headers", pa.binary()),
        pa.field("payload", pa.binary()),
        pa.field("byte_length", pa.int64()),
        pa.field("provisional", pa.bool_()),
    ]
)

# Indexed by the stored record_type byte, so naming the types is one ``take`` (the decoder
# passes only the types we write).
_TYPE_NAMES = pa.array(
    [
        fmt.RecordType(code).name if code in fmt.RecordType._value2member_map_ else None
        for code in range(256)
    ],
    pa.string(),
)


def read_segment_batches(
    plan: SegmentPlan, window: TimeWindow = ALL_TIME
) -> Iterator[pa.RecordBatch]:
    """The rows of one segment, or of the byte range the plan names.

    Reads the segment's first ``plan.size_bytes`` bytes (its length when
    planned), so every range of a segment still being written sees the same
    bytes. A range whose batches check clean is read alone (``_clean_range``);
    any other range, and a whole segment, is classified by ``scan_segment`` over
    the whole segment, keeping the rows that start in the plan's range.
    """
    segment = SegmentRef(plan.epoch, plan.first_sequence, Path(plan.path))
    try:
        handle = open_journal_file(segment.path)
    except FileNotFoundError:
        return  # removed by retention after planning: nothing left to report
    with handle, READ_BUFFERS.lend() as loan:
        source = PlannedBytes(handle, plan.size_bytes, loan)
        clean = None if plan.whole_segment else _clean_range(source, plan)
        if clean is not None:
            node, first, span, batches = clean
            yield from _record_rows(plan, node, STATUS_OK, span, batches, window, first)
            return
        data = source.read_span(0, source.size)
        whole = _clean_segment(data, plan) if plan.whole_segment else None
        if whole is not None:
            node, batches = whole
            yield from _record_rows(plan, node, STATUS_OK, data, batches, window)
            return
        yield from _scanned_rows(plan, segment, data, window)


def _clean_segment(data: memoryview, plan: SegmentPlan) -> tuple[str, Batches] | None:
    """(node, batches) of a whole segment whose every byte after the header is a batch
    that checks clean and ends within the fence: what ``scan_segment`` would find, without
    its Python call per batch. None for anything else, which the scan then classifies."""
    try:
        header = fmt.decode_segment_header(data[:SEGMENT_HEADER_MAX_BYTES])
    except fmt.FormatError:  # UnsupportedFormatVersion too
        return None
    limit = len(data) if plan.fence_limit is None else min(plan.fence_limit, len(data))
    batches = clean_batches(data, header.header_len, len(data), limit)
    return None if batches is None else (header.node_id, batches)


def _scanned_rows(
    plan: SegmentPlan, segment: SegmentRef, data: memoryview, window: TimeWindow
) -> Iterator[pa.RecordBatch]:
    """The rows of the plan's range, from the store's classification of the whole segment.

    Rows from the segment's open end on (its trailing damage, and the fenced
    bytes after it) are ``provisional``: a later read, after the segment grew or
    its epoch went on in a new segment, may see them otherwise.
    """
    scan = scan_segment(
        segment, data, fence_limit=plan.fence_limit, is_epoch_tail=plan.is_epoch_tail
    )
    node = scan.header.node_id if scan.header is not None else None
    open_from = _open_end(scan, plan.fence_limit)
    damage = [d for d in scan.damage if plan.holds(d.offset)]
    if damage:
        yield _damage_rows(plan, node, damage, open_from)
    valid = Batches.of((b.offset, b.header) for b in scan.batches if plan.holds(b.offset))
    yield from _record_rows(plan, node, STATUS_OK, data, valid, window)
    if scan.fenced_offset is not None:
        fenced = list(batches_from(data, scan.fenced_offset))
        stopped_at = scan.fenced_offset  # where the complete batches past the fence end
        if fenced:
            stopped_at = fenced[-1].offset + fenced[-1].header.batch_len
        provisional = scan.fenced_offset >= open_from
        mine = Batches.of((b.offset, b.header) for b in fenced if plan.holds(b.offset))
        yield from _record_rows(
            plan, node, STATUS_FENCED, data, mine, window, provisional=provisional
        )
        if stopped_at < len(data) and plan.holds(stopped_at):
            detail = "bytes past the fence that are not a complete batch"
            ranges = [(STATUS_FENCED, stopped_at, len(data) - stopped_at, detail)]
            yield _range_rows(plan, node, ranges, provisional=True)


def _open_end(scan: SegmentScan, fence_limit: int | None) -> int:
    """Where the segment's open end starts: its trailing damage, which runs to the end of
    the bytes (or to the fence); past the end of the bytes if there is none."""
    bound = scan.size if fence_limit is None else min(fence_limit, scan.size)
    if scan.damage and scan.damage[-1].offset + scan.damage[-1].length >= bound:
        return scan.damage[-1].offset
    return scan.size + 1


# How much a range's walk to its first batch reads at a time: several small batches' headers
# per read, and little more than one header when batches are large.
_WALK_READ_BYTES = 64 * 1024


def _clean_range(
    source: PlannedBytes, plan: SegmentPlan
) -> tuple[str, int, memoryview, Batches] | None:
    """The range's batches when they, and the batch headers before them, check clean.

    Returns (node, offset of the range's first batch, the bytes of its batches,
    each batch's offset in those bytes and header), or None where the segment
    needs the whole scan: a bad segment header, anything but a complete batch
    header on the way to the range, or a batch in the range that is not a
    complete batch with a good CRC ending within the fence.

    The walk to the range reads headers only. Those batches' CRCs are not
    checked, and need not be: after a batch with a bad CRC the store's scan
    resumes first at the batch its header says is next, which is where the walk
    goes, so its classification reaches the range's first batch the same way.
    (Only if two consecutive batches there had bad CRCs and the payloads in
    them held a whole valid batch at an 8-byte boundary could the scan resume
    elsewhere; or if bytes crafted to do so spent the scan's resynchronisation
    budget, which honest damage never does.)
    """
    try:
        header = fmt.decode_segment_header(source.read(0, SEGMENT_HEADER_MAX_BYTES))
    except fmt.FormatError:  # UnsupportedFormatVersion too
        return None
    limit = source.size if plan.fence_limit is None else min(plan.fence_limit, source.size)
    offset, window_start, window = header.header_len, 0, b""
    starts: list[int] = []
    while offset < source.size and (plan.range_end is None or offset < plan.range_end):
        if offset + fmt.BATCH_HEADER_LEN > window_start + len(window):
            window_start = offset
            window = source.read(offset, _WALK_READ_BYTES)
        status, batch = fmt.check_batch_header(window, offset - window_start, source.size - offset)
        if status is not fmt.BatchStatus.OK or batch is None:
            return None
        if offset >= plan.range_start:
            starts.append(offset)
        offset += batch.batch_len
    if not starts:
        return header.node_id, 0, memoryview(b""), Batches.of([])
    first = starts[0]
    span = source.read_span(first, offset - first)
    if len(span) != offset - first:
        return None  # the file shrank under us
    batches = clean_batches(span, 0, len(span), limit - first)
    return None if batches is None else (header.node_id, first, span, batches)


def _record_rows(
    plan: SegmentPlan,
    node: str | None,
    status: str,
    data: memoryview,
    batches: Batches,
    window: TimeWindow,
    data_offset: int = 0,
    *,
    provisional: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Checked batches as rows of ``RECORDS_SCHEMA``, several journal batches per Arrow batch.

    ``data`` holds the segment's bytes from ``data_offset`` on, and each batch's
    offset is in ``data``. The column decoder decodes each group of journal
    batches at once (``decode_batches``); the casts and the per-row location
    columns are then done once per group: no Python work per journal batch.

    A batch whose records are not ours (the decoder's faults) becomes a range row:
    ``damaged_batch`` with recovery's reason, as recovery reports it; past a fence,
    ``fenced`` (recovery counts it fenced, whatever its records), with the reason.
    """
    admitted = window.admits_batches(batches.commit_unix_ns)
    if admitted is not None:
        batches = batches.where(admitted)
    rows = _RowsOf(plan.name, node, status, data, data_offset, provisional)
    for group in batches.groups(ROWS_GROUP_BYTES):
        assembled, faults = rows.assemble(group, window)
        if faults:
            yield _fault_rows(plan, node, status, faults, data_offset, provisional)
        if assembled is not None:
            yield assembled


def _fault_rows(
    plan: SegmentPlan,
    node: str | None,
    status: str,
    faults: tuple[Fault, ...],
    data_offset: int,
    provisional: bool,
) -> pa.RecordBatch:
    if status == STATUS_OK:
        kind, why = DamageKind.DAMAGED_BATCH.value, ""
    else:
        kind, why = status, "a batch past the fence whose records are not ours: "
    ranges = [(kind, data_offset + f.offset, f.batch_len, why + f.reason) for f in faults]
    return _range_rows(plan, node, ranges, provisional=provisional)


@dataclass(frozen=True)
class _RowsOf:
    """Where a group of batches comes from: what every row of it shares."""

    segment: str
    node: str | None
    status: str
    data: memoryview
    data_offset: int
    provisional: bool

    def assemble(
        self, group: Batches, window: TimeWindow
    ) -> tuple[pa.RecordBatch | None, tuple[Fault, ...]]:
        # ``data`` is a lent buffer: the columns get bytes of their own.
        decoded = decode_batches(self.data, group, copy=True)
        if decoded.columns is None:
            return None, decoded.faults
        group, columns = decoded.kept, decoded.columns
        counts = group.record_count
        offsets = group.offset + self.data_offset
        n = len(columns.sequence)
        commits_us = group.commit_unix_ns // 1000
        stamps_ns = pa.array(columns.timestamp_unix_ns.view("datetime64[ns]"), _NANOSECONDS)
        rows = pa.RecordBatch.from_arrays(
            [
                pa.repeat(pa.scalar(self.segment, pa.string()), n),
                pa.array(np.repeat(offsets, counts), pa.int64()),
                pa.repeat(pa.scalar(self.status, pa.string()), n),
                pa.nulls(n, pa.string()),
                pa.repeat(pa.scalar(self.node, pa.string()), n),
                # Spark's longs: the decoder passes no epoch or sequence past 2^63 - 1.
                pa.array(columns.epoch.view(np.int64), pa.int64()),
                pa.array(columns.sequence.view(np.int64), pa.int64()),
                stamps_ns.cast(_TIMESTAMP, safe=False),
                pa.array(np.repeat(commits_us, counts).view("datetime64[us]"), _TIMESTAMP),
                pc.take(_TYPE_NAMES, pa.array(columns.record_type, pa.uint8())),
                columns.destination.arrow(pa.string()),
                columns.message_id.arrow(pa.string()),
                columns.headers.arrow(pa.binary()),
                columns.payload.arrow(pa.binary()),
                pa.nulls(n, pa.int64()),
                pa.repeat(pa.scalar(self.provisional, pa.bool_()), n),
            ],
            schema=RECORDS_SCHEMA,
        )
        if window.since_unix_ns is not None or window.until_unix_ns is not None:
            stamps = columns.timestamp_unix_ns
            keep = np.ones(n, dtype=bool)
            if window.since_unix_ns is not None:
                keep &= stamps >= window.since_unix_ns
            if window.until_unix_ns is not None:
                keep &= stamps < window.until_unix_ns
            rows = rows.filter(pa.array(keep))
        return (rows if rows.num_rows else None), decoded.faults


def _damage_rows(
    plan: SegmentPlan, node: str | None, damage: list[Damage], open_from: int
) -> pa.RecordBatch:
    ranges = [(d.kind.value, d.offset, d.length, d.reason) for d in damage]
    return _range_rows(plan, node, ranges, open_from=open_from)


def _range_rows(
    plan: SegmentPlan,
    node: str | None,
    ranges: list[tuple[str, int, int, str]],
    *,
    provisional: bool = False,
    open_from: int | None = None,
) -> pa.RecordBatch:
    """One row per byte range with no trustworthy records: status, where, how long, why."""
    rows = [
        {
            "segment": plan.name,
            "batch_offset": offset,
            "status": status,
            "detail": detail,
            "node": node,
            "epoch": plan.epoch,
            "byte_length": length,
            "provisional": provisional or (open_from is not None and offset >= open_from),
        }
        for status, offset, length, detail in ranges
    ]
    return pa.RecordBatch.from_pylist(rows, schema=RECORDS_SCHEMA)
