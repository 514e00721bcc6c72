"""Reading one segment file into Arrow record batches, every byte accounted for by a status.

This is the data source's reader function, free of Spark so it can be tested
and benchmarked alone. The store classifies the bytes (``scan_segment``, with
the fence limit and epoch-tail flag from the plan); the store's format module
decodes groups of valid batches into columns (``decode_batches(...).to_arrow()``);
this module only adds where each row came from and its status, and casts to the
types Spark takes. There is no Python loop per record.

Statuses: ``ok`` (a record recovery applies), ``fenced`` (a stale master's
write past a fence; the record is decoded but never counted), and the damage
kinds of ``store.segments.DamageKind`` (``damaged_batch``, ``torn_tail``,
``bad_segment_header``, ``unsupported_version``) as one row per unusable byte
range, whose record columns are null: bytes that fail their CRC cannot be
trusted, and a format this release does not know cannot be read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from primacy.spark.columns import decode_batches
from primacy.spark.journal_plan import ALL_TIME, SegmentPlan, TimeWindow
from primacy.store import format as fmt
from primacy.store.segments import Damage, SegmentRef, read_segment, scan_segment

STATUS_OK = "ok"
STATUS_FENCED = "fenced"

_TIMESTAMP = pa.timestamp("us", tz="UTC")  # Spark's TimestampType in Arrow
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
    ]
)

# Indexed by the stored record_type byte, so naming the types is one ``take``.
_TYPE_NAMES = pa.array(
    [fmt.RecordType(code).name if code in fmt.RecordType._value2member_map_ else f"UNKNOWN_{code}"
     for code in range(256)],
    pa.string(),
)  # fmt: skip


def read_segment_batches(
    plan: SegmentPlan, window: TimeWindow = ALL_TIME
) -> Iterator[pa.RecordBatch]:
    """Every row of one segment: its valid records, fenced records and damaged ranges."""
    segment = SegmentRef(plan.epoch, plan.first_sequence, Path(plan.path))
    try:
        data = read_segment(segment)
    except FileNotFoundError:
        return  # removed by retention after planning: nothing left to report
    scan = scan_segment(
        segment, data, fence_limit=plan.fence_limit, is_epoch_tail=plan.is_epoch_tail
    )
    node = scan.header.node_id if scan.header is not None else None
    if scan.damage:
        yield _damage_rows(plan, node, scan.damage)
    valid = ((batch.offset, batch.header) for batch in scan.batches)
    yield from _record_rows(plan.name, node, STATUS_OK, data, valid, window)
    if scan.fenced_offset is not None:
        fenced = _FencedBatches(data, scan.fenced_offset)
        yield from _record_rows(plan.name, node, STATUS_FENCED, data, fenced, window)
        if fenced.stopped_at < len(data):
            detail = "bytes past the fence that are not a complete batch"
            ranges = [(STATUS_FENCED, fenced.stopped_at, len(data) - fenced.stopped_at, detail)]
            yield _range_rows(plan, node, ranges)


def _record_rows(
    segment: str,
    node: str | None,
    status: str,
    data: bytes,
    batches: Iterable[tuple[int, fmt.BatchHeader]],
    window: TimeWindow,
) -> Iterator[pa.RecordBatch]:
    """Checked batches as rows of ``RECORDS_SCHEMA``, several journal batches per Arrow batch.

    The column decoder decodes each group of journal batches at once (``decode_batches``);
    the casts and the per-row location columns are then done once per group,
    so the Python work per journal batch is a few attribute reads.
    """
    group: list[tuple[int, fmt.BatchHeader]] = []
    size = 0
    for offset, header in batches:
        if not window.admits_batch(header.commit_unix_ns):
            continue
        group.append((offset, header))
        size += header.batch_len
        if size >= ROWS_GROUP_BYTES:
            yield from _nonempty(_assemble(segment, node, status, data, group, window))
            group, size = [], 0
    if group:
        yield from _nonempty(_assemble(segment, node, status, data, group, window))


def _nonempty(rows: pa.RecordBatch | None) -> list[pa.RecordBatch]:
    return [rows] if rows is not None else []


def _assemble(
    segment: str,
    node: str | None,
    status: str,
    data: bytes,
    group: list[tuple[int, fmt.BatchHeader]],
    window: TimeWindow,
) -> pa.RecordBatch | None:
    columns = decode_batches(data, group)
    offsets = np.fromiter((offset for offset, _ in group), np.int64, len(group))
    decoded = columns.to_arrow()
    counts = columns.record_counts
    n = decoded.num_rows
    commits_us = np.fromiter((h.commit_unix_ns for _, h in group), np.int64, len(group)) // 1000
    rows = pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(segment, pa.string()), n),
            pa.array(np.repeat(offsets, counts), pa.int64()),
            pa.repeat(pa.scalar(status, pa.string()), n),
            pa.nulls(n, pa.string()),
            pa.repeat(pa.scalar(node, pa.string()), n),
            decoded.column("epoch").cast(pa.int64()),
            decoded.column("sequence").cast(pa.int64()),
            decoded.column("timestamp").cast(_TIMESTAMP, safe=False),
            pa.array(np.repeat(commits_us, counts).view("datetime64[us]"), _TIMESTAMP),
            pc.take(_TYPE_NAMES, decoded.column("record_type")),
            decoded.column("destination"),
            decoded.column("message_id"),
            decoded.column("headers"),
            decoded.column("payload"),
            pa.nulls(n, pa.int64()),
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
    return rows if rows.num_rows else None


class _FencedBatches:
    """The stale master's complete batches past the fence; ``stopped_at`` is where they end.

    Like ``scan_segment``'s own count of fenced records, the walk stops at the
    first bytes past the fence that do not check as a batch.
    """

    def __init__(self, data: bytes, offset: int) -> None:
        self.data = data
        self.stopped_at = offset

    def __iter__(self) -> Iterator[tuple[int, fmt.BatchHeader]]:
        while self.stopped_at < len(self.data):
            status, header = fmt.check_batch(self.data, self.stopped_at)
            if status is not fmt.BatchStatus.OK or header is None:
                return
            start = self.stopped_at
            self.stopped_at += header.batch_len
            yield start, header


def _damage_rows(plan: SegmentPlan, node: str | None, damage: list[Damage]) -> pa.RecordBatch:
    ranges = [(d.kind.value, d.offset, d.length, d.reason) for d in damage]
    return _range_rows(plan, node, ranges)


def _range_rows(
    plan: SegmentPlan, node: str | None, ranges: list[tuple[str, int, int, str]]
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
        }
        for status, offset, length, detail in ranges
    ]
    return pa.RecordBatch.from_pylist(rows, schema=RECORDS_SCHEMA)
