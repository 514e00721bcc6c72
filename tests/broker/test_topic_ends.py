"""Durable subscriptions ended while the broker still holds something of theirs (issue 48):
a SEND submitted before the end is not kept for the subscription begun again under the
same name, as the journal does not keep it; what an ended subscription held back goes."""

from __future__ import annotations

import asyncio

from primacy.broker.config import BrokerConfig
from primacy.broker.queues import AckMode, Subscription
from primacy.broker.topics import durable_queue_name
from tests.broker.nodes import Masters, eventually, stored_state
from tests.broker.stomppy import StompPy
from tests.broker.test_topics import TOPIC, Durable

QUEUE = durable_queue_name("billing", "audit")  # Durable's client id and subscription name


def test_a_send_submitted_before_an_end_is_not_kept_for_the_subscription_begun_again(
    masters: Masters,
) -> None:
    """The window (a SEND submitted, not yet journaled, while its durable subscription is
    ended and begun again) cannot be held open from a client: the journal commits within a
    millisecond. So the test drives the broker's own methods, in one turn of its loop, in the
    order commands.py calls them for a SEND, a naming UNSUBSCRIBE and a SUBSCRIBE."""
    master = masters.start()
    first = Durable(master)
    assert first.subscribe()
    first.close()
    broker, loop = master.service._broker, master.service._loop
    assert broker is not None and loop is not None
    # The broker sees the first subscriber's DISCONNECT a moment after close() returns
    # (under asyncio on a busy host, after the attach below had run: DURABLE_IN_USE).
    eventually(lambda: QUEUE not in broker.topics.attached, "the first subscriber detached")

    async def race() -> list[str]:
        sent = broker.send(TOPIC, "between", {}, b"sent before the end")
        ended = broker.topics.end(broker, QUEUE)
        again = Subscription(None, "again", TOPIC, AckMode.CLIENT_INDIVIDUAL, 10)
        begun = broker.topics.attach(broker, again, "billing", "audit")
        await asyncio.gather(sent, ended, *begun)
        broker.topics.detach(broker, again)
        held = broker.book.queues.get(QUEUE)
        return [message.message_id for message in held.ready_messages()] if held is not None else []

    assert asyncio.run_coroutine_threadsafe(race(), loop).result(10) == []
    # The journal agrees: nothing pending for the new subscription, so a new master would
    # not deliver it either.
    assert stored_state(masters.share).pending.get(QUEUE, {}) == {}
    assert master.service.stats()["messages_unacknowledged"] == 0


def test_what_an_ended_durable_subscription_held_back_goes_with_it(masters: Masters) -> None:
    """A message that cannot move to the subscription's dead-letter queue (the copy, with its
    longer destination and two more headers, would pass ``max_message_size``) is held back;
    ending the subscription by name drops it with the rest (its ACK-less record is settled by
    the UNSUBSCRIBE record), and the broker stops counting it."""
    limit = 4096
    master = masters.start(BrokerConfig(max_redeliveries=0), max_message_size=limit)
    subscriber = Durable(master)
    assert subscriber.subscribe()
    producer = StompPy(master.address)
    assert producer.send(TOPIC, "x" * (limit - 200), **{"message-id": "big"})
    delivered = subscriber.messages(1)[0]
    # Back once: past max_redeliveries 0, and too large for the dead-letter queue.
    subscriber.connection.nack(delivered.headers["ack"], receipt="nacked")
    assert subscriber.listener.wait_receipt("nacked")
    assert master.service.stats()["messages_ready"] == 0  # held back, not ready again
    subscriber.close()
    assert master.service.stats()["messages_unacknowledged"] == 1  # held back: still counted
    ender = Durable(master)
    ender.connection.unsubscribe(
        "d1", headers={"activemq.subscriptionName": "audit", "receipt": "ended"}
    )
    assert ender.listener.wait_receipt("ended")
    assert master.service.stats()["messages_unacknowledged"] == 0
    assert stored_state(masters.share).pending.get(QUEUE, {}) == {}
    ender.close()
    producer.close()
