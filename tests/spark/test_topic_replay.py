"""The replay over a journal with a durable topic subscription: its SUBSCRIBE and UNSUBSCRIBE
records are in ``records``, and a topic message's row in ``messages`` counts the deliveries and
ACKs its durable subscriptions journaled under their queue names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from primacy.spark.replay import ReplayOptions, run
from primacy.store.config import StoreConfig
from primacy.store.journal import JournalStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPIC = "/topic/prices"
QUEUE = "durable:1:a:x"


def test_the_replay_counts_a_durable_subscriptions_acks_under_the_topic(
    spark_session: Any, tmp_path: Path
) -> None:
    share = tmp_path / "share"
    config = StoreConfig(share=share, node_id="node-a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_subscription(TOPIC, QUEUE, ends=False).result()
        store.append_send(TOPIC, "m1", b"1.5").result()
        store.append_send(TOPIC, "m2", b"1.6").result()
        store.append_delivery(QUEUE, "m1").result()
        store.append_ack(QUEUE, "m1").result()
        store.append_subscription(TOPIC, QUEUE, ends=True).result()
    options = ReplayOptions(share=str(share), out=str(tmp_path / "out"), quiet=True)
    run(options, spark_session)

    def table(name: str) -> list[dict[str, Any]]:
        rows = spark_session.read.parquet(str(tmp_path / "out" / name)).collect()
        return [row.asDict() for row in rows]

    kinds = [(r["type"], r["destination"], r["message_id"]) for r in table("records")]
    assert ("SUBSCRIBE", TOPIC, QUEUE) in kinds and ("UNSUBSCRIBE", TOPIC, QUEUE) in kinds
    messages = {(r["destination"], r["message_id"]): r for r in table("messages")}
    assert set(messages) == {(TOPIC, "m1"), (TOPIC, "m2")}
    first = messages[(TOPIC, "m1")]
    assert (first["state"], first["acks"], first["deliveries"]) == ("acked", 1, 1)
    assert messages[(TOPIC, "m2")]["state"] == "pending"
