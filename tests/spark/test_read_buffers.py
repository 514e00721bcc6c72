"""Rows read from a segment stay valid after the reader reads the next one (no Spark).

The reader reads every segment into one buffer it reuses (``_ReadBuffers``), so
a row that still pointed into that buffer would silently change into another
segment's bytes. Rows are kept here across many segments, in both decoder
paths: a group of one journal batch (a copy forced) and of many (joined).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from primacy.spark.journal_plan import plan_segments, split_ranges
from primacy.spark.segment_reader import RECORDS_SCHEMA, read_segment_batches
from primacy.store.config import StoreConfig
from primacy.store.journal import JournalStore


def payload(i: int, size: int) -> bytes:
    return (f"message {i:06d} " * (size // 15 + 1)).encode()[:size]


@pytest.mark.parametrize(
    ("payload_bytes", "per_batch"),
    [(3000, 1), (200, 1), (100, 20), (70_000, 2)],
    ids=["one-batch-per-segment", "many-small-batches", "larger-batches", "large-payloads"],
)
def test_rows_kept_from_earlier_segments_keep_their_own_bytes(
    tmp_path: Path, payload_bytes: int, per_batch: int
) -> None:
    share = tmp_path / "share"
    config = StoreConfig(share=share, node_id="node-a", segment_max_bytes=4096)
    store = JournalStore.open(config, epoch=1, fencing_check=lambda: None)
    count = 120
    for first in range(0, count, per_batch):
        pending = [
            store.append_send(f"queue-{i % 3}", f"id-{i}", payload(i, payload_bytes))
            for i in range(first, first + per_batch)
        ]
        for future in pending:
            future.result(timeout=5)
    store.close()
    plans = plan_segments(share)
    assert len(plans) > 3, "the test needs several segments"

    # Every plan read to the end before the next, as an executor does; batches kept.
    kept = [batch for plan in plans for batch in read_segment_batches(plan)]
    # A byte range read in between reuses the buffer once more.
    for part in split_ranges(plans[-1], 4096):
        list(read_segment_batches(part))

    table = pa.Table.from_batches(kept, schema=RECORDS_SCHEMA)
    sends = table.filter(pc.equal(table["type"], "SEND"))
    got = sorted(
        zip(sends["message_id"].to_pylist(), sends["destination"].to_pylist(),
            sends["payload"].to_pylist(), strict=True),
        key=lambda row: int(row[0].split("-")[1]),
    )  # fmt: skip
    assert got == [(f"id-{i}", f"queue-{i % 3}", payload(i, payload_bytes)) for i in range(count)]
