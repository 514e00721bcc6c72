"""Topics with stock stomp.py: non-durable fan-out, durable subscriptions absent, back, ended,
and across a takeover (in-process; a real group's kill -9 of the master:
tests/integration/test_topic_failover.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import stomp

from primacy.broker import codes
from primacy.store import tools
from tests.broker.nodes import Master, Masters, stored_state
from tests.broker.stomppy import Collector, StompPy

TOPIC = "/topic/news"
DURABLE = {"activemq.subscriptionName": "audit"}


class Durable:
    """A stomp.py connection with a client-id, as ActiveMQ's durable subscribers connect."""

    def __init__(self, master: Master, client_id: str | None = "billing") -> None:
        self.connection = stomp.Connection12([master.address], heartbeats=(0, 0))
        self.listener = Collector()
        self.connection.set_listener("collector", self.listener)
        headers = {"client-id": client_id} if client_id else {}
        self.connection.connect(wait=True, headers=headers)

    def subscribe(self, ack: str = "client-individual", name: str = "audit") -> bool:
        headers = {"activemq.subscriptionName": name, "receipt": "sub"}
        self.connection.subscribe(TOPIC, "d1", ack=ack, headers=headers)
        return self.listener.wait_receipt("sub")

    def messages(self, count: int) -> list[Any]:
        return [self.listener.messages.get(timeout=10) for _ in range(count)]

    def ack(self, frame: Any, receipt: str) -> None:
        self.connection.ack(frame.headers["ack"], receipt=receipt)
        assert self.listener.wait_receipt(receipt)

    def close(self) -> None:
        if self.connection.is_connected():
            self.connection.disconnect()


def records(share: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    tools.dump(share, found.append)
    return found


def test_every_subscription_present_gets_each_message_and_acks_per_subscription(
    masters: Masters,
) -> None:
    master = masters.start()
    auto, client, individual = (
        StompPy(master.address),
        StompPy(master.address),
        StompPy(master.address),
    )
    auto.subscribe(TOPIC, "a")
    client.subscribe(TOPIC, "c", ack="client")
    individual.subscribe(TOPIC, "i", ack="client-individual")
    producer = StompPy(master.address)
    assert producer.send(TOPIC, "one") and producer.send(TOPIC, "two")
    for consumer in (auto, client, individual):
        got = [consumer.message(), consumer.message()]
        assert [frame.body for frame in got] == ["one", "two"]
        assert {frame.headers["destination"] for frame in got} == {TOPIC}
    # A subscription that comes later gets only what is sent after it.
    late = StompPy(master.address)
    late.subscribe(TOPIC, "l")
    assert late.no_message()
    # client-individual: NACK one, it comes back, redelivered, to that subscription only.
    assert producer.send(TOPIC, "three")
    again = individual.message()
    individual.connection.nack(again.headers["ack"])
    back = individual.message()
    assert (back.body, back.headers.get("redelivered")) == ("three", "true")
    assert client.message().body == "three" and client.no_message()
    assert late.message().body == "three"
    # One SEND record per message; nothing per non-durable subscriber (no ACK, no DELIVER).
    kinds = [
        r["type"] for r in records(masters.share) if r.get("destination", "").startswith("/topic")
    ]
    assert kinds == ["SEND", "SEND", "SEND"]
    assert "ACK" not in {r["type"] for r in records(masters.share)}
    assert stored_state(masters.share).pending == {}


def test_a_durable_subscription_keeps_messages_while_its_subscriber_is_away(
    masters: Masters,
) -> None:
    master = masters.start()
    subscriber = Durable(master)
    assert subscriber.subscribe()
    subscriber.close()
    producer = StompPy(master.address)
    for body in ("a", "b", "c"):
        assert producer.send(TOPIC, body)
    pending = stored_state(masters.share).pending
    assert [len(queue) for queue in pending.values()] == [3]  # kept in the journal, once each
    back = Durable(master)
    assert back.subscribe()
    got = back.messages(3)
    assert [frame.body for frame in got] == ["a", "b", "c"]
    assert {frame.headers["destination"] for frame in got} == {TOPIC}
    back.ack(got[0], "ack-a")
    back.close()
    again = Durable(master)
    assert again.subscribe()
    assert [frame.body for frame in again.messages(2)] == ["b", "c"]  # unacked: redelivered
    assert again.listener.messages.empty()
    again.close()


def test_a_durable_subscription_survives_a_takeover_and_ends_by_name(masters: Masters) -> None:
    master = masters.start(checkpoint_interval_records=3)  # a checkpoint holds it too
    subscriber = Durable(master)
    assert subscriber.subscribe(ack="client")
    producer = StompPy(master.address)
    for body in ("1", "2", "3", "4"):
        assert producer.send(TOPIC, body)
    first = subscriber.messages(4)
    subscriber.ack(first[1], "ack-2")  # client mode: 1 and 2 settled
    subscriber.close()
    producer.close()
    master = masters.failover(master)
    producer = StompPy(master.address)
    assert producer.send(TOPIC, "5")
    back = Durable(master)
    assert back.subscribe(ack="client")
    got = back.messages(3)
    assert [frame.body for frame in got] == ["3", "4", "5"]
    assert [frame.headers.get("redelivered") for frame in got] == ["true", "true", None]
    # UNSUBSCRIBE with the name ends it: what it held goes, later messages are not kept.
    back.connection.unsubscribe("d1", headers={**DURABLE, "receipt": "end"})
    assert back.listener.wait_receipt("end")
    assert producer.send(TOPIC, "6")
    state = stored_state(masters.share)
    assert (state.pending, state.durables) == ({}, {})
    back.close()
    master = masters.failover(master)
    fresh = Durable(master)
    assert fresh.subscribe()
    assert fresh.listener.messages.empty()  # begun afresh: nothing of before
    fresh.close()


def test_durable_subscriptions_are_refused_without_a_client_id_or_twice(
    masters: Masters,
) -> None:
    master = masters.start()
    anonymous = Durable(master, client_id=None)
    assert not anonymous.subscribe()
    assert anonymous.listener.errors[0].headers["message"].startswith(codes.DURABLE_NEEDS_CLIENT_ID)
    first = Durable(master)
    assert first.subscribe()
    second = Durable(master)
    assert not second.subscribe()
    assert second.listener.errors[0].headers["message"].startswith(codes.DURABLE_IN_USE)
    first.close()


def test_two_durable_subscriptions_each_get_every_message_read_back_after_a_takeover(
    masters: Masters,
) -> None:
    """The copies kept for two durable subscriptions share their topic message's order; read
    back from the journal after a takeover, one subscription's copy must not be taken for
    the other's (the body reader once kept bodies by order alone: the second reader's batch
    replaced the first's, and one subscriber waited for ever)."""
    master = masters.start()
    subscribers = {name: Durable(master, client_id=name) for name in ("a", "b")}
    for subscriber in subscribers.values():
        assert subscriber.subscribe()
        subscriber.close()
    producer = StompPy(master.address)
    bodies = [f"news {number}" for number in range(12)]
    for body in bodies:
        assert producer.send(TOPIC, body)
    producer.close()
    master = masters.failover(master)
    back = {name: Durable(master, client_id=name) for name in ("a", "b")}
    last: dict[str, Any] = {}
    for name, subscriber in back.items():  # one after the other: a's bodies read, then b's
        headers = {**DURABLE, "activemq.prefetchSize": "1", "receipt": "sub"}
        subscriber.connection.subscribe(TOPIC, "d1", ack="client-individual", headers=headers)
        assert subscriber.listener.wait_receipt("sub")
        last[name] = subscriber.messages(1)[0]
    received: dict[str, list[str]] = {name: [last[name].body] for name in back}
    for number in range(1, len(bodies)):
        for name, subscriber in back.items():
            subscriber.ack(last[name], f"ack-{name}-{number}")
            last[name] = subscriber.messages(1)[0]
            received[name].append(last[name].body)
    assert received == {"a": bodies, "b": bodies}
    for name, subscriber in back.items():
        subscriber.ack(last[name], "last")
        subscriber.close()
    assert stored_state(masters.share).pending == {}
