"""The Spark replay over the crafted journal of issue 43: damage reported with counts, never fatal.

Before issue 43 the replay exited with ``ArrowInvalid`` and no tables at all on a
batch whose CRC holds but whose record lengths run past the end of its segment. Now
the job goes on, and its anomalies table and report hold exactly the damage recovery
reports (tests/spark/test_read_side_parity.py holds the reader function to it batch
by batch); the records table holds exactly the records recovery applies.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from primacy.spark.replay import ReplayOptions, run
from primacy.store.recovery import recover
from tests.store.read_side_corpus import write_corpus

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_the_replay_reports_every_damaged_batch_and_goes_on(
    spark_session: Any, tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "share", "missing segment")
    report = recover(corpus.journal, log=False).report
    damage = report.damaged + report.torn_tails
    options = ReplayOptions(share=str(corpus.share), out=str(tmp_path / "out"), quiet=True)
    document = run(options, spark_session)

    anomalies = spark_session.read.parquet(str(tmp_path / "out" / "anomalies")).collect()
    damaged_rows = {
        (r["segment"], r["batch_offset"], r["kind"], r["detail"])
        for r in anomalies
        if r["kind"] in ("damaged_batch", "torn_tail")
    }
    assert damaged_rows == {(d.segment, d.offset, d.kind.value, d.reason) for d in damage}
    assert document["damaged_ranges"] == len(damage)
    by_kind = Counter(d.kind.value for d in damage)
    assert {kind: document["anomalies"].get(kind) for kind in by_kind} == dict(by_kind)
    assert document["records_ok"] == report.records_applied
    html = (tmp_path / "out" / "report.html").read_text()
    assert f"anomalies: damaged_batch</td><td>{by_kind['damaged_batch']}" in html
