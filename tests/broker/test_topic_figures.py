"""What /status shows of topics, with stock stomp.py against a serving broker: durable
subscriptions, the messages held for absent subscribers and the oldest one's age, and the
copies dropped for a non-durable subscriber too far behind (PRIMACY-1562, counted) (issue 48).
/metrics reads these fields (api/metrics.py, tests/api/test_metrics.py)."""

from __future__ import annotations

from typing import Any

from primacy.broker.topics import LIVE_SUBSCRIPTION_MESSAGES
from tests.broker.nodes import Master, Masters, eventually
from tests.broker.stomppy import StompPy
from tests.broker.test_topics import TOPIC, Durable


def _figures(master: Master) -> dict[str, Any]:
    stats = master.service.stats()
    names = ("durable_subscriptions", "durable_messages_held", "topic_messages_dropped")
    return {name: stats[name] for name in names}


def test_status_counts_durable_subscriptions_and_what_they_hold_while_away(
    masters: Masters,
) -> None:
    master = masters.start()
    assert master.service.stats()["durable_oldest_age_s"] == 0.0
    subscriber = Durable(master)
    assert subscriber.subscribe()
    subscriber.close()
    producer = StompPy(master.address)
    assert producer.send(TOPIC, "one") and producer.send(TOPIC, "two")
    assert _figures(master) == {
        "durable_subscriptions": 1,
        "durable_messages_held": 2,
        "topic_messages_dropped": 0,
    }
    eventually(lambda: master.service.stats()["durable_oldest_age_s"] > 0, "an age")
    back = Durable(master)
    assert back.subscribe()
    assert [frame.body for frame in back.messages(2)] == ["one", "two"]
    # Attached: nothing is held for an absent subscriber.
    assert _figures(master)["durable_messages_held"] == 0
    assert master.service.stats()["durable_oldest_age_s"] == 0.0
    back.close()
    producer.close()


def test_status_counts_copies_dropped_for_a_non_durable_subscriber_too_far_behind(
    masters: Masters,
) -> None:
    master = masters.start()
    slow = StompPy(master.address)
    slow.subscribe(TOPIC, "slow", ack="client-individual")  # never acknowledges
    producer = StompPy(master.address)
    extra = 3
    for number in range(LIVE_SUBSCRIPTION_MESSAGES + extra):
        assert producer.send(TOPIC, f"m{number}")
    eventually(lambda: _figures(master)["topic_messages_dropped"] == extra, "the drops counted")
    assert _figures(master)["durable_subscriptions"] == 0
    slow.close()
    producer.close()
