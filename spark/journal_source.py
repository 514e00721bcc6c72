"""The ``journal`` PySpark data source: ``spark.read.format("journal").load(SHARE)``.

One input partition per segment file, or per byte range of about
``range_bytes`` of a larger one; each partition is read by
``spark.segment_reader`` into Arrow record batches, which PySpark 4 takes as
they are. Damaged and fenced bytes become rows with a ``status`` rather than
failing the job.

Options (all optional):

- ``epochs``: comma-separated epochs to read, e.g. ``"3,4"``.
- ``since`` / ``until``: keep records with ``since <= timestamp < until``; ISO
  8601 (no offset means UTC) or Unix seconds. Rows for damaged byte ranges
  have no timestamp and are always kept.
- ``range_bytes``: split segments larger than this into byte ranges of this
  size, one partition each (default ``journal_plan.RANGE_BYTES``, 16 MiB).
- ``plan``: the segments to read and where in each to start, as
  ``journal_plan.plans_to_json`` writes them, instead of listing the share
  (the replay's incremental runs use it).

Executors need this package and ``store`` importable (see docs/replay.md) and
the share at the same path as the driver.
"""

from __future__ import annotations

import os
import re
import socket
import stat
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from primacy.spark.journal_plan import (
    RANGE_BYTES,
    OptionError,
    SegmentPlan,
    TimeWindow,
    parse_time,
    plan_segments,
    plans_from_json,
    split_ranges,
)
from primacy.spark.segment_reader import RECORDS_SCHEMA, read_segment_batches

SOURCE_NAME = "journal"

_SPARK_TYPES = {
    pa.string(): StringType(),
    pa.int64(): LongType(),
    pa.binary(): BinaryType(),
    pa.timestamp("us", tz="UTC"): TimestampType(),
    pa.bool_(): BooleanType(),
}
RECORDS_SPARK_SCHEMA = StructType(
    [StructField(f.name, _SPARK_TYPES[f.type], nullable=True) for f in RECORDS_SCHEMA]
)


def window_from_options(options: dict[str, str]) -> TimeWindow:
    since, until = options.get("since"), options.get("until")
    window = TimeWindow(parse_time(since) if since else None, parse_time(until) if until else None)
    if (
        window.since_unix_ns is not None
        and window.until_unix_ns is not None
        and window.until_unix_ns <= window.since_unix_ns
    ):
        raise OptionError(f"until ({until}) must be later than since ({since})")
    return window


def epochs_from_options(options: dict[str, str]) -> frozenset[int] | None:
    text = options.get("epochs") or options.get("epoch")
    if not text:
        return None
    try:
        return frozenset(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise OptionError(f"epochs must be comma-separated numbers, not {text!r}") from exc


def range_bytes_from_options(options: dict[str, str]) -> int:
    text = options.get("range_bytes")
    try:
        value = int(text) if text else RANGE_BYTES
    except ValueError:
        value = 0
    if value <= 0:
        raise OptionError(f"range_bytes must be a positive number of bytes, not {text!r}")
    return value


class SegmentPartition(InputPartition):  # type: ignore[misc]
    """One segment file, or one byte range of it: the unit of parallelism."""

    def __init__(self, plan: SegmentPlan) -> None:
        super().__init__(plan)
        self.plan = plan


class JournalReader(DataSourceReader):  # type: ignore[misc]
    """Plans on the driver (fences, epoch tails); reads one segment or byte range per task."""

    def __init__(self, share: str, options: dict[str, str]) -> None:
        self.share = share
        self.window = window_from_options(options)
        self.epochs = epochs_from_options(options)
        self.range_bytes = range_bytes_from_options(options)
        self.plan = plans_from_json(options["plan"]) if options.get("plan") else None

    def partitions(self) -> list[SegmentPartition]:
        plans = self.plan if self.plan is not None else plan_segments(self.share, self.epochs)
        chosen = [p for p in plans if self.epochs is None or p.epoch in self.epochs]
        return [
            SegmentPartition(part)
            for plan in chosen
            for part in split_ranges(plan, self.range_bytes)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentPartition):
            # With nothing to read (an empty journal, an incremental run with nothing new)
            # Spark still runs one task, on a placeholder partition of its own.
            return iter(())
        return read_on_this_host(partition.plan, self.window)


class ShareNotReadable(OSError):
    """A task's host cannot read the share the driver planned from: it is not mounted there."""


# How a ShareNotReadable reaches the driver: as text inside Spark's failure (a Py4J or
# captured Python exception holding the executor's traceback), not as itself.
_SHARE_NOT_READABLE_TEXT = re.compile(r"ShareNotReadable: (segment .*? \(docs/replay\.md\))")


def share_not_readable_in(failure: BaseException) -> str | None:
    """The message of the ShareNotReadable that failed a Spark job, or None if none did."""
    found = _SHARE_NOT_READABLE_TEXT.search(str(failure))
    return found.group(1) if found else None


def read_on_this_host(plan: SegmentPlan, window: TimeWindow) -> Iterator[pa.RecordBatch]:
    """``read_segment_batches``, with a missing share told apart from retention.

    The reader returns nothing for a segment that is gone, which is right when
    retention removed it after planning; but on an executor where the share is
    not mounted every segment is gone, and the job would end with empty tables
    and no error. So the journal directory must be there: if it is not (or the
    segment cannot be opened for any other reason), the task fails naming the
    host, since the driver could read the same path.
    """
    journal = os.path.dirname(plan.path)
    try:
        if not stat.S_ISDIR(os.stat(journal).st_mode):
            raise NotADirectoryError(f"{journal} is not a directory")
        yield from read_segment_batches(plan, window)
    except OSError as exc:
        raise ShareNotReadable(
            f"segment {plan.path} is not readable on executor host {socket.gethostname()}: "
            f"{exc}; mount the share at the same path on every executor (docs/replay.md)"
        ) from exc


class JournalDataSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("journal").load(SHARE)``: the records of a share's journal."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return RECORDS_SPARK_SCHEMA

    def reader(self, schema: StructType) -> JournalReader:
        options = dict(self.options)
        share = options.get("path")
        if not share:
            raise OptionError('give the share: spark.read.format("journal").load("/srv/share")')
        return JournalReader(share, options)


def register(session: SparkSession) -> None:
    """Make ``format("journal")`` available in this session."""
    session.dataSource.register(JournalDataSource)
