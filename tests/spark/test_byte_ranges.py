"""A segment read as several byte ranges gives exactly the rows it gives read whole (no Spark).

Every row belongs to the one range holding its start offset; ranges whose
batches check clean are read alone, the others from the store's scan of the
whole segment, so damage, fences and torn tails are classified the same way.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from primacy.spark.journal_plan import SegmentPlan, plan_segments, split_ranges
from primacy.spark.segment_reader import RECORDS_SCHEMA, read_segment_batches
from primacy.store import format as fmt
from primacy.store.config import StoreConfig
from primacy.store.journal import JournalStore
from tests.spark.journal_scenario import write_failover_journal
from tests.spark.test_segment_reader import batch_offsets


def rows(plans: list[SegmentPlan]) -> list[dict[str, Any]]:
    return in_order([batch for plan in plans for batch in read_segment_batches(plan)])


def in_order(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    table = pa.Table.from_batches(batches, schema=RECORDS_SCHEMA)
    return sorted(
        table.to_pylist(), key=lambda r: (r["segment"], r["batch_offset"], r["sequence"] or -1)
    )


def in_ranges(plans: list[SegmentPlan], range_bytes: int) -> list[SegmentPlan]:
    return [part for plan in plans for part in split_ranges(plan, range_bytes)]


def statuses(table: list[dict[str, Any]]) -> set[str]:
    return {row["status"] for row in table}


def one_store_share(tmp_path: Path, payload_bytes: int, count: int) -> Path:
    share = tmp_path / "share"
    store = JournalStore.open(
        StoreConfig(share=share, node_id="node-a"), epoch=1, fencing_check=lambda: None
    )
    for i in range(count):
        store.append_send("q", f"m{i}", bytes([i % 251]) * payload_bytes).result(timeout=5)
    store.close()
    return share


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_failover_journal(tmp_path_factory.mktemp("ranges") / "share").share


@pytest.mark.parametrize("range_bytes", [48, 333, 1024])
def test_small_ranges_give_the_rows_of_whole_segments_through_failovers_damage_and_fences(
    scenario: Path, range_bytes: int
) -> None:
    plans = plan_segments(scenario)
    whole = rows(plans)
    assert {"ok", "fenced", "damaged_batch"} <= statuses(whole)  # the cases under test are here
    assert len(in_ranges(plans, range_bytes)) > 2 * len(plans)  # and split
    assert rows(in_ranges(plans, range_bytes)) == whole


def test_a_boundary_inside_a_batch_leaves_the_batch_to_the_range_it_starts_in(
    tmp_path: Path,
) -> None:
    share = one_store_share(tmp_path, payload_bytes=3000, count=6)
    [plan] = plan_segments(share)
    _, second, third, *_ = batch_offsets(Path(plan.path))
    inside = (second + third) // 2
    before = replace(plan, range_end=inside)
    after = plan.from_offset(inside)
    before_rows, after_rows = rows([before]), rows([after])
    assert second in {r["batch_offset"] for r in before_rows}
    assert all(r["batch_offset"] > inside for r in after_rows)
    sends = [r["message_id"] for r in before_rows + after_rows if r["type"] == "SEND"]
    assert sorted(sends) == [f"m{i}" for i in range(6)]
    assert rows([before, after]) == rows([plan])


def test_a_range_holding_no_batch_start_reads_nothing(tmp_path: Path) -> None:
    share = one_store_share(tmp_path, payload_bytes=50_000, count=3)
    [plan] = plan_segments(share)
    _, second, third, *_ = batch_offsets(Path(plan.path))
    inside = replace(plan, range_start=second + 8, range_end=third - 8)
    assert rows([inside]) == []
    assert rows(in_ranges([plan], 4096)) == rows([plan])


def test_a_torn_tail_is_classified_as_the_whole_segment_is_and_marked_provisional(
    tmp_path: Path,
) -> None:
    share = one_store_share(tmp_path, payload_bytes=700, count=20)
    [plan] = plan_segments(share)
    path = Path(plan.path)
    last = batch_offsets(path)[-1]
    with path.open("r+b") as handle:  # a crash in the middle of the last batch
        handle.truncate(last + fmt.BATCH_HEADER_LEN + 5)
    [plan] = plan_segments(share)
    whole = rows([plan])
    torn = [r for r in whole if r["status"] == "torn_tail"]
    assert [(r["batch_offset"], r["provisional"]) for r in torn] == [(last, True)]
    assert not any(r["provisional"] for r in whole if r["status"] != "torn_tail")
    for range_bytes in (64, 1000, 5000):
        assert rows(in_ranges([plan], range_bytes)) == whole


def test_bytes_written_after_planning_are_not_read(tmp_path: Path) -> None:
    share = one_store_share(tmp_path, payload_bytes=100, count=4)
    [plan] = plan_segments(share)
    with Path(plan.path).open("ab") as handle:  # as if the master were still appending
        handle.write(b"\0" * 64)
    assert rows([plan]) == rows(in_ranges([plan], 100))
    assert statuses(rows([plan])) == {"ok"}


def test_the_data_source_splits_by_its_range_bytes_option_and_refuses_a_bad_one(
    scenario: Path,
) -> None:
    pytest.importorskip("pyspark", reason="the [spark] extra is not installed")
    from primacy.spark.journal_plan import OptionError
    from primacy.spark.journal_source import JournalReader

    segments = len(plan_segments(scenario))
    whole = JournalReader(str(scenario), {})
    split = JournalReader(str(scenario), {"range_bytes": "512"})
    assert len(whole.partitions()) == segments < len(split.partitions())
    tasks = [split.read(partition) for partition in split.partitions()]
    assert in_order([batch for task in tasks for batch in task]) == rows(plan_segments(scenario))
    for bad in ("0", "-5", "16MiB"):
        with pytest.raises(OptionError, match="range_bytes"):
            JournalReader(str(scenario), {"range_bytes": bad})
