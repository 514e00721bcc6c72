"""Writing the replay's records table, whole or incrementally: ``OUT/records/load=N/date=D/``.

The table is partitioned by load (which run's write added the rows: appending
is adding directories, and a crashed run's are told apart and deleted) and by
the record's UTC date (what analysts filter on; damage rows, which have no
timestamp, are under ``date=__HIVE_DEFAULT_PARTITION__``). What a run reads
and what the state file says are worked out by ``spark.replay_state``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, IntegerType, StructField, StructType

from primacy.spark import replay_state as rs
from primacy.spark.journal_plan import plan_segments, plans_to_json
from primacy.spark.journal_source import RECORDS_SPARK_SCHEMA

RECORDS_TABLE_SCHEMA = StructType(
    [
        *RECORDS_SPARK_SCHEMA.fields,
        StructField("load", IntegerType()),
        StructField("date", DateType()),
    ]
)
PARTITIONS = ("load", "date")


@dataclass(frozen=True)
class RecordsWritten:
    """What one run read: for the progress line."""

    segments_read: int
    segments_listed: int
    bytes_read: int
    read_again_wholly: tuple[str, ...]
    continued: bool  # from an earlier run's state


def read_records(session: SparkSession, out: str) -> DataFrame:
    """The records table (every load); an empty one if no run has written rows yet."""
    return session.read.schema(RECORDS_TABLE_SCHEMA).parquet(f"{out}/{rs.RECORDS_DIR_NAME}")


def write_all(session: SparkSession, share: str, out: str, source_options: dict[str, str]) -> None:
    """Rewrite the table from the whole journal (or the window the options choose), keeping no
    state: for remote --out directories and windowed replays, which cannot be continued."""
    reader = session.read.format("journal")
    for name, value in source_options.items():
        reader = reader.option(name, value)
    rows = _partitioned(reader.load(share), F.lit(1))
    rows.write.mode("overwrite").partitionBy(*PARTITIONS).parquet(f"{out}/{rs.RECORDS_DIR_NAME}")


def write_continued(
    session: SparkSession, share: str, out: str, *, incremental: bool
) -> RecordsWritten:
    """Add what the journal holds beyond the state of ``out`` (all of it when not
    ``incremental``, or without a state), then write the new state after the table."""
    rs.records_dir(out).mkdir(parents=True, exist_ok=True)
    state = rs.read_state(out, share) if incremental else None
    if not incremental:
        rs.forget_state(out)  # before the tables it describes go
    rs.remove_unlisted(out, state)
    continued = state is not None
    state = state or rs.ReplayState(share)
    plans = plan_segments(share)
    run = rs.next_run(state, plans)

    fresh = session.read.format("journal").option("plan", plans_to_json(run.reads)).load(share)
    load = F.when(F.col("provisional"), run.provisional_load).otherwise(run.final_load)
    rows = _partitioned(fresh, load)
    dropped: set[int] = set()
    if state.loads:
        old = read_records(session, out)
        if state.open_load is not None:  # provisional rows: replaced by what is read again
            # ... but for segments not read again (removed by retention): theirs are kept.
            unread = {n for n, seen in state.segments.items() if seen.provisional} - run.names
            if unread:
                kept = old.where(F.col("load") == state.open_load)
                kept = kept.where(F.col("segment").isin(sorted(unread)))
                rows = rows.unionByName(kept.withColumn("load", F.lit(run.provisional_load)))
            dropped.add(state.open_load)
        if run.redo:  # loads holding rows of segments read again wholly: rewritten without them
            redone = old.where(F.col("segment").isin(sorted(run.redo)))
            touched = {r["load"] for r in redone.select("load").distinct().collect()}
            touched.discard(state.open_load)
            if touched:
                kept = old.where(F.col("load").isin(sorted(touched)))
                kept = kept.where(~F.col("segment").isin(sorted(run.redo)))
                rows = rows.unionByName(kept.withColumn("load", F.lit(run.final_load)))
                dropped |= touched
    rows.write.mode("append").partitionBy(*PARTITIONS).parquet(str(rs.records_dir(out)))

    written = [n for n in (run.final_load, run.provisional_load) if rs.load_dir(out, n).is_dir()]
    provisional_from: dict[str, int] = {}
    if run.provisional_load in written:
        opened = (
            read_records(session, out)
            .where(F.col("load") == run.provisional_load)
            .groupBy("segment")
            .agg(F.min("batch_offset").alias("first"))
        )
        provisional_from = {r["segment"]: r["first"] for r in opened.collect()}
    rs.write_state(out, rs.after_run(state, run, provisional_from, dropped, written))
    rs.remove_loads(out, dropped)  # listed nowhere now: the table is the state's loads
    return RecordsWritten(
        segments_read=len(run.reads),
        segments_listed=len(plans),
        bytes_read=sum(plan.size_bytes - plan.range_start for plan in run.reads),
        read_again_wholly=tuple(sorted(run.redo)),
        continued=continued,
    )


def _partitioned(rows: DataFrame, load: Any) -> DataFrame:
    return rows.withColumn("load", load.cast(IntegerType())).withColumn(
        "date", F.to_date("timestamp")
    )
