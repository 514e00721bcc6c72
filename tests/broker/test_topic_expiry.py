"""Expiry on durable topic subscriptions with stock stomp.py: a copy held for an absent
subscriber is swept once its ``expires`` passes (dropped, counted, settled in the journal),
not only checked when the subscriber comes back (issue 48)."""

from __future__ import annotations

from primacy.broker.expiry import now_ms
from tests.broker.nodes import Masters, eventually, stored_state
from tests.broker.stomppy import StompPy
from tests.broker.test_topics import TOPIC, Durable


def _held(masters: Masters) -> list[list[str]]:
    """The message ids the journal holds for each durable subscription."""
    return [sorted(queue) for queue in stored_state(masters.share).pending.values()]


def test_a_durable_copy_past_its_expiry_is_swept_while_its_subscriber_is_away(
    masters: Masters,
) -> None:
    master = masters.start()
    subscriber = Durable(master)
    assert subscriber.subscribe()
    subscriber.close()
    producer = StompPy(master.address)
    soon = str(now_ms() + 200)
    assert producer.send(TOPIC, "short-lived", expires=soon, **{"message-id": "s"})
    assert producer.send(TOPIC, "kept", **{"message-id": "k"})
    assert _held(masters) == [["k", "s"]]
    # Nobody attached: the sweep drops it (a subscription has no dead-letter queue), counted,
    # and its ACK record means no later master holds it either.
    eventually(lambda: master.service.stats()["messages_expired"] == 1, "the sweep")
    eventually(lambda: _held(masters) == [["k"]], "its ACK journaled")
    assert master.service.stats()["messages_unacknowledged"] == 1
    back = Durable(master)
    assert back.subscribe()
    assert [frame.body for frame in back.messages(1)] == ["kept"]
    back.close()
    producer.close()
