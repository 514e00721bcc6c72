"""The replay's derived tables, each a Spark DataFrame over the ``records`` table.

``messages`` pairs each SEND with its ACK; ``anomalies`` lists damaged and
fenced bytes, duplicate message ids and sequence gaps; ``epoch_facts`` and
``role_events`` are the small inputs of ``spark.tenure``. Only records with
status ``ok`` count as what happened; the others are what the store refused.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    LongType,
    StringType,
    StructField,
    StructType,
)

from primacy.spark.segment_reader import STATUS_FENCED, STATUS_OK
from primacy.spark.tenure import EpochFacts, RoleEvent, role_event_from_control
from primacy.store.messages import TRANSACTION_LOSS_AVERTED

ANOMALY_SCHEMA = StructType(
    [
        StructField("kind", StringType()),
        StructField("segment", StringType()),
        StructField("batch_offset", LongType()),
        StructField("byte_length", LongType()),
        StructField("epoch", LongType()),
        StructField("node", StringType()),
        StructField("sequence_from", LongType()),
        StructField("sequence_to", LongType()),
        StructField("records", LongType()),
        StructField("destination", StringType()),
        StructField("message_id", StringType()),
        StructField("detail", StringType()),
    ]
)


def _micros(column: Column) -> Column:
    return F.unix_micros(column)


def ok_records(records: DataFrame) -> DataFrame:
    return records.where(F.col("status") == STATUS_OK)


def messages(records: DataFrame) -> DataFrame:
    """One row per (destination, message id): its send, its deliveries, its ack, and the times.

    The time in queue runs from the SEND record to the first ACK record; every
    DELIVER record after the first counts as a redelivery (to another consumer,
    after a NACK, or by a later master after a failover). A topic message's row counts
    the ACKs and deliveries of every durable subscription it was kept for.
    """
    ok = ok_records(records)
    subscriptions = _durable_subscriptions(ok)
    sends = (
        ok.where(F.col("type") == "SEND")
        .groupBy("destination", "message_id")
        .agg(
            F.min("timestamp").alias("send_time"),
            F.min("sequence").alias("send_sequence"),
            F.min_by("epoch", "sequence").alias("send_epoch"),
            F.min_by("node", "sequence").alias("send_node"),
            F.count(F.lit(1)).alias("sends"),
        )
    )
    acks = (
        _under_topic(ok.where(F.col("type") == "ACK"), subscriptions)
        .groupBy("destination", "message_id")
        .agg(
            F.min("timestamp").alias("ack_time"),
            F.min("sequence").alias("ack_sequence"),
            F.min_by("epoch", "sequence").alias("ack_epoch"),
            F.count(F.lit(1)).alias("acks"),
        )
    )
    deliveries = (
        _under_topic(ok.where(F.col("type") == "DELIVER"), subscriptions)
        .groupBy("destination", "message_id")
        .agg(
            F.min("timestamp").alias("first_delivery"),
            F.count(F.lit(1)).alias("deliveries"),
        )
    )
    joined = sends.join(acks, ["destination", "message_id"], "full_outer").join(
        deliveries, ["destination", "message_id"], "left"
    )
    return joined.select(
        "destination",
        "message_id",
        "send_time",
        "send_sequence",
        "send_epoch",
        "send_node",
        "first_delivery",
        "ack_time",
        "ack_sequence",
        "ack_epoch",
        ((_micros(F.col("ack_time")) - _micros(F.col("send_time"))) / 1000.0).alias(
            "time_in_queue_ms"
        ),
        ((_micros(F.col("first_delivery")) - _micros(F.col("send_time"))) / 1000.0).alias(
            "time_to_first_delivery_ms"
        ),
        F.coalesce("deliveries", F.lit(0)).alias("deliveries"),
        F.greatest(F.col("deliveries") - 1, F.lit(0)).alias("redeliveries"),
        (F.col("ack_epoch") - F.col("send_epoch")).alias("epochs_crossed"),
        F.coalesce("sends", F.lit(0)).alias("sends"),
        F.coalesce("acks", F.lit(0)).alias("acks"),
        F.when(F.col("send_time").isNull(), "ack_without_send")
        .when(F.col("ack_time").isNull(), "pending")
        .otherwise("acked")
        .alias("state"),
    )


def _durable_subscriptions(ok: DataFrame) -> DataFrame:
    """Each durable topic subscription's queue name and its topic (the latest SUBSCRIBE's):
    a few rows."""
    return (
        ok.where(F.col("type") == "SUBSCRIBE")
        .groupBy(F.col("message_id").alias("subscription_queue"))
        .agg(F.max_by("destination", "sequence").alias("subscription_topic"))
    )


def _under_topic(rows: DataFrame, subscriptions: DataFrame) -> DataFrame:
    """ACK and DELIVER records name a durable subscription's queue (docs/journal-format.md):
    counted under the topic its message was sent to."""
    joined = rows.join(
        F.broadcast(subscriptions), rows["destination"] == F.col("subscription_queue"), "left"
    )
    return joined.withColumn(
        "destination", F.coalesce(F.col("subscription_topic"), F.col("destination"))
    ).drop("subscription_queue", "subscription_topic")


def epoch_facts(records: DataFrame) -> dict[int, EpochFacts]:
    """Per epoch: node, first and last record, first message, counts (a few rows, collected)."""
    is_message = F.col("type").isin("SEND", "ACK", "DELIVER")
    rows = (
        records.where(F.col("sequence").isNotNull())
        .groupBy("epoch")
        .agg(
            F.first("node", ignorenulls=True).alias("node"),
            F.min(F.when(F.col("status") == STATUS_OK, _micros(F.col("timestamp")))).alias("first"),
            F.max(F.when(F.col("status") == STATUS_OK, _micros(F.col("timestamp")))).alias("last"),
            F.min(
                F.when((F.col("status") == STATUS_OK) & is_message, _micros(F.col("timestamp")))
            ).alias("first_message"),
            F.count(F.when(F.col("status") == STATUS_OK, 1)).alias("records"),
            F.count(F.when(F.col("status") == STATUS_FENCED, 1)).alias("fenced"),
        )
        .collect()
    )
    facts = {}
    for row in rows:
        if row["records"] == 0:
            continue  # only fenced writes survive of this epoch; its claim still counts
        facts[row["epoch"]] = EpochFacts(
            epoch=row["epoch"],
            node=row["node"],
            first_record_unix_ns=row["first"] * 1000,
            last_record_unix_ns=row["last"] * 1000,
            first_message_unix_ns=None
            if row["first_message"] is None
            else row["first_message"] * 1000,
            records=row["records"],
            fenced_records=row["fenced"],
        )
    return facts


def role_events(records: DataFrame) -> list[RoleEvent]:
    """The journaled role changes (control records are few: one per role change)."""
    rows = (
        ok_records(records)
        .where(F.col("type") == "CONTROL")
        .select("epoch", _micros(F.col("timestamp")).alias("at"), "payload")
        .collect()
    )
    events = []
    for row in rows:
        try:
            payload: Any = json.loads(bytes(row["payload"]).decode())
        except (ValueError, UnicodeDecodeError):
            continue  # not ours to judge here; the record is still in the records table
        if isinstance(payload, dict):
            event = role_event_from_control(payload, row["epoch"], row["at"] * 1000)
            if event is not None:
                events.append(event)
    return events


def anomalies(session: SparkSession, records: DataFrame) -> DataFrame:
    """Damaged and fenced bytes, duplicate message ids and sequence gaps, one row each."""
    return (
        _damaged(records)
        .unionByName(_fenced(records))
        .unionByName(_duplicate_ids(records))
        .unionByName(_sequence_gaps(session, records))
    )


def _with_defaults(frame: DataFrame) -> DataFrame:
    """Fill the columns a kind of anomaly does not have with typed nulls, in schema order."""
    return frame.select(
        *[
            F.col(f.name).cast(f.dataType)
            if f.name in frame.columns
            else F.lit(None).cast(f.dataType).alias(f.name)
            for f in ANOMALY_SCHEMA.fields
        ]
    )


def _damaged(records: DataFrame) -> DataFrame:
    damaged = records.where(~F.col("status").isin(STATUS_OK, STATUS_FENCED))
    return _with_defaults(
        damaged.select(
            F.col("status").alias("kind"),
            "segment",
            "batch_offset",
            "byte_length",
            "epoch",
            "node",
            "detail",
        )
    )


def _fenced(records: DataFrame) -> DataFrame:
    """One row per segment with fenced writes: a stale master wrote them after it was replaced."""
    fenced = records.where(F.col("status") == STATUS_FENCED)
    grouped = fenced.groupBy("segment", "epoch", "node").agg(
        F.min("batch_offset").alias("batch_offset"),
        F.min("sequence").alias("sequence_from"),
        F.max("sequence").alias("sequence_to"),
        F.count("sequence").alias("records"),
        F.sum("byte_length").alias("byte_length"),
    )
    return _with_defaults(
        grouped.withColumn("kind", F.lit("fenced")).withColumn(
            "detail",
            F.lit(
                f"{TRANSACTION_LOSS_AVERTED} written by a stale master past a later epoch's "
                "fence; ignored"
            ),
        )
    )


def _duplicate_ids(records: DataFrame) -> DataFrame:
    """(destination, message id) pairs journaled by more than one valid SEND (recovery keeps
    the first); the same id on two destinations is two messages."""
    sends = ok_records(records).where(F.col("type") == "SEND")
    grouped = sends.groupBy("destination", "message_id").agg(
        F.count(F.lit(1)).alias("records"),
        F.min("sequence").alias("sequence_from"),
        F.max("sequence").alias("sequence_to"),
        F.min_by("epoch", "sequence").alias("epoch"),
        F.min_by("segment", "sequence").alias("segment"),
        F.min_by("node", "sequence").alias("node"),
    )
    duplicates = grouped.where(F.col("records") > 1)
    return _with_defaults(
        duplicates.withColumn("kind", F.lit("duplicate_id")).withColumn(
            "detail", F.concat(F.lit("sent "), F.col("records").cast("string"), F.lit(" times"))
        )
    )


def _sequence_gaps(session: SparkSession, records: DataFrame) -> DataFrame:
    """Sequences missing between consecutive valid batches (records lost to damage).

    Within a segment a window per segment finds the holes; across segments the
    few per-segment ranges are compared on the driver, in journal order.
    """
    batches = (
        ok_records(records)
        .groupBy("segment", "batch_offset")
        .agg(
            F.min("sequence").alias("low"),
            F.max("sequence").alias("high"),
            F.first("epoch").alias("epoch"),
            F.first("node").alias("node"),
        )
    )
    order = Window.partitionBy("segment").orderBy("low")
    inside = (
        batches.withColumn("previous_high", F.lag("high").over(order))
        .where(F.col("low") > F.col("previous_high") + 1)
        .select(
            F.lit("sequence_gap").alias("kind"),
            "segment",
            "batch_offset",
            "epoch",
            "node",
            (F.col("previous_high") + 1).alias("sequence_from"),
            (F.col("low") - 1).alias("sequence_to"),
            (F.col("low") - F.col("previous_high") - 1).alias("records"),
            F.lit("sequences missing between two valid batches").alias("detail"),
        )
    )
    ranges = (
        batches.groupBy("segment")
        .agg(
            F.min("low").alias("low"), F.max("high").alias("high"), F.first("epoch").alias("epoch")
        )
        .orderBy("epoch", "low")
        .collect()
    )
    across = [
        {
            "kind": "sequence_gap",
            "segment": current["segment"],
            "epoch": current["epoch"],
            "sequence_from": previous["high"] + 1,
            "sequence_to": current["low"] - 1,
            "records": current["low"] - previous["high"] - 1,
            "detail": f"sequences missing between {previous['segment']} and this segment",
        }
        for previous, current in itertools.pairwise(ranges)
        if current["low"] > previous["high"] + 1
    ]
    across_frame = _with_defaults(
        session.createDataFrame(
            [tuple(row.get(f.name) for f in ANOMALY_SCHEMA.fields) for row in across],
            ANOMALY_SCHEMA,
        )
    )
    return _with_defaults(inside).unionByName(across_frame)


def throughput_per_minute(records: DataFrame) -> DataFrame:
    """SEND records per minute and destination (for the report's chart)."""
    sends = ok_records(records).where(F.col("type") == "SEND")
    return (
        sends.groupBy(F.date_trunc("minute", "timestamp").alias("minute"), "destination")
        .count()
        .orderBy("minute", "destination")
    )


def time_in_queue_histogram(messages_frame: DataFrame) -> DataFrame:
    """Acked messages per quarter-decade of time in queue (ms), for the distribution chart."""
    acked = messages_frame.where(F.col("time_in_queue_ms").isNotNull())
    bucket = F.floor(F.log10(F.greatest(F.col("time_in_queue_ms"), F.lit(0.001))) * 4) / 4
    return acked.groupBy(bucket.alias("log10_ms")).count().orderBy("log10_ms")
