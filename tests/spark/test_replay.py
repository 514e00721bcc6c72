"""The replay on a local[2] Spark over a journal written through four tenures and three failovers.

The tables' counts must equal what the producers wrote and what the store's
own recovery reports; the report must name every failover.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from primacy.spark.replay import ReplayOptions, run
from primacy.store.recovery import RecoveryResult, recover
from tests.spark.journal_scenario import WrittenJournal, write_failover_journal

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@dataclass(frozen=True)
class Replayed:
    written: WrittenJournal
    recovered: RecoveryResult
    out: Path
    document: dict[str, Any]
    session: Any

    def table(self, name: str) -> list[dict[str, Any]]:
        return [row.asDict() for row in self.session.read.parquet(str(self.out / name)).collect()]


@pytest.fixture(scope="module")
def replayed(spark_session: Any, tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    root = tmp_path_factory.mktemp("replay")
    written = write_failover_journal(root / "share")
    recovered = recover(root / "share" / "journal", use_checkpoint=False, log=False)
    options = ReplayOptions(share=str(root / "share"), out=str(root / "out"), quiet=True)
    document = run(options, spark_session)
    return Replayed(written, recovered, root / "out", document, spark_session)


def test_records_hold_every_record_the_store_applied_fenced_or_lost(replayed: Replayed) -> None:
    rows = replayed.table("records")
    report = replayed.recovered.report
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == report.records_applied
    assert len([r for r in rows if r["status"] == "fenced"]) == report.fenced_records == 1
    assert len([r for r in rows if r["sequence"] is None]) == len(report.damaged) == 1
    sends = sorted((r["destination"], r["message_id"]) for r in ok if r["type"] == "SEND")
    assert sends == sorted(replayed.written.sends)
    acks = sorted((r["destination"], r["message_id"]) for r in ok if r["type"] == "ACK")
    assert acks == sorted(replayed.written.acks)
    assert len([r for r in ok if r["type"] == "CONTROL"]) == replayed.written.role_records


def test_messages_pair_sends_with_acks_and_leave_the_recovered_ones_pending(
    replayed: Replayed,
) -> None:
    rows = {(r["destination"], r["message_id"]): r for r in replayed.table("messages")}
    assert set(rows) == set(replayed.written.sends)
    acked = {key for key, row in rows.items() if row["state"] == "acked"}
    assert acked == set(replayed.written.acks)
    pending = {key for key, row in rows.items() if row["state"] == "pending"}
    assert len(pending) == replayed.recovered.state.pending_count()
    assert all(rows[key]["time_in_queue_ms"] >= 0 for key in acked)
    assert rows[("orders", "a10")]["epochs_crossed"] == 1  # sent under epoch 1, acked under 2
    assert rows[("orders", replayed.written.duplicate_id)]["sends"] == 2
    delivered = Counter(replayed.written.deliveries)
    assert {key: row["deliveries"] for key, row in rows.items() if row["deliveries"]} == delivered
    assert rows[("orders", "a10")]["redeliveries"] == 1  # delivered by epoch 1, again by 2
    assert rows[("orders", "a0")]["redeliveries"] == 0
    assert all(rows[key]["first_delivery"] is not None for key in delivered)
    assert all(rows[key]["time_to_first_delivery_ms"] >= 0 for key in delivered)
    undelivered = set(rows) - set(delivered)
    assert undelivered and all(rows[key]["first_delivery"] is None for key in undelivered)
    assert all(rows[key]["redeliveries"] == 0 for key in undelivered)


def test_tenure_says_who_was_master_and_how_each_tenure_ended(replayed: Replayed) -> None:
    rows = sorted(replayed.table("tenure"), key=lambda r: r["epoch"])
    assert [(r["epoch"], r["node"]) for r in rows] == sorted(
        replayed.written.nodes_by_epoch.items()
    )
    assert [r["how_ended"] for r in rows] == ["graceful", "crashed", "lost_lease", "serving"]
    assert [r["fenced_records"] for r in rows] == [0, 0, 1, 0]
    assert rows[0]["end_reason"] == "MASTER -> STOPPING: shutdown"
    assert all(r["from_time"] is not None for r in rows)


def test_gaps_cover_each_failover_with_a_positive_duration(replayed: Replayed) -> None:
    rows = sorted(replayed.table("gaps"), key=lambda r: r["after_epoch"])
    assert [(r["after_epoch"], r["before_epoch"]) for r in rows] == [(1, 2), (2, 3), (3, 4)]
    assert all(0 < r["duration_s"] <= r["longest_duration_s"] < 30 for r in rows)
    assert rows[0]["duration_s"] >= 0.05  # the scenario waits 50 ms between tenures


def test_anomalies_list_the_damage_the_fence_the_duplicate_and_the_lost_sequence(
    replayed: Replayed,
) -> None:
    rows = replayed.table("anomalies")
    assert sorted(r["kind"] for r in rows) == [
        "damaged_batch",
        "duplicate_id",
        "fenced",
        "sequence_gap",
    ]
    by_kind = {r["kind"]: r for r in rows}
    assert by_kind["duplicate_id"]["message_id"] == replayed.written.duplicate_id
    gap = by_kind["sequence_gap"]
    assert [gap["sequence_from"], gap["sequence_to"]] == replayed.written.damaged_sequences * 2
    assert (by_kind["fenced"]["epoch"], by_kind["fenced"]["records"]) == (3, 1)
    damaged = replayed.recovered.report.damaged[0]
    assert (by_kind["damaged_batch"]["segment"], by_kind["damaged_batch"]["batch_offset"]) == (
        damaged.segment,
        damaged.offset,
    )


def test_the_report_files_exist_and_name_every_failover(replayed: Replayed) -> None:
    document = json.loads((replayed.out / "report.json").read_text())
    assert [(f["from_epoch"], f["to_epoch"], f["how_ended"]) for f in document["failovers"]] == [
        (1, 2, "graceful"),
        (2, 3, "crashed"),
        (3, 4, "lost_lease"),
    ]
    assert document["records_ok"] == replayed.recovered.report.records_applied
    assert document["anomalies"]["fenced"] == 1
    assert document["deliveries"] == len(replayed.written.deliveries)
    assert document["redeliveries"] == len(replayed.written.deliveries) - len(
        set(replayed.written.deliveries)
    )
    page = (replayed.out / "report.html").read_text()
    nodes = replayed.written.nodes_by_epoch
    for failover in document["failovers"]:
        old, new = failover["from_epoch"], failover["to_epoch"]
        assert f"epoch {old} ({nodes[old]})</td><td>epoch {new} ({nodes[new]})" in page
    assert page.count("data:image/png;base64,") == 3


def test_the_data_source_reads_chosen_epochs_and_times(replayed: Replayed) -> None:
    share = str(replayed.written.share)
    records = replayed.session.read.format("journal").option("epochs", "2").load(share)
    facts = records.groupBy("epoch", "status").count().collect()
    epoch_2 = [r for r in replayed.table("records") if r["epoch"] == 2]
    assert [(r["epoch"], r["status"], r["count"]) for r in facts] == [(2, "ok", len(epoch_2))]

    ok = sorted(
        (r for r in replayed.table("records") if r["status"] == "ok"), key=lambda r: r["sequence"]
    )
    middle = ok[len(ok) // 2]["timestamp"]  # naive local time, as pyspark collects it
    since = middle.astimezone(UTC).isoformat()
    later = replayed.session.read.format("journal").option("since", since).load(share)
    expected = [r for r in ok if r["timestamp"] >= middle]
    assert later.where("status = 'ok'").count() == len(expected)
