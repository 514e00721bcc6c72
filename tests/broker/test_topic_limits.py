"""What a topic costs the master: 10 000 subscriptions of one topic fit the default budgets of
one network, and a non-durable subscriber that stops taking messages holds at most 64."""

from __future__ import annotations

import pytest

from primacy.broker import codes
from primacy.broker.frames import Frame, encode
from primacy.broker.topics import LIVE_SUBSCRIPTION_MESSAGES
from tests.broker.nodes import Masters, RawClient
from tests.broker.stomppy import StompPy

TOPIC = "/topic/ticks"


def subscribe_many(client: RawClient, count: int, first: int) -> None:
    """``count`` SUBSCRIBEs in one write, the last asking for a receipt."""
    frames = [
        encode(Frame.make("SUBSCRIBE", {"id": f"s{first + n}", "destination": TOPIC}))
        for n in range(count - 1)
    ]
    last = {"id": f"s{first + count}", "destination": TOPIC, "receipt": "subscribed"}
    client.send_bytes(b"".join(frames) + encode(Frame.make("SUBSCRIBE", last)))
    reply = client.read()
    assert (reply.command, reply.get("receipt-id")) == ("RECEIPT", "subscribed"), reply


@pytest.mark.slow
def test_ten_thousand_subscriptions_of_one_network_each_get_every_message(
    masters: Masters,
) -> None:
    master = masters.start()
    clients = [RawClient(master.address) for _ in range(10)]
    for number, client in enumerate(clients):  # 1000 each: max_subscriptions_per_connection
        assert client.connect().command == "CONNECTED"
        subscribe_many(client, 1000, number * 1000)
    producer = StompPy(master.address)
    assert producer.send(TOPIC, "a") and producer.send(TOPIC, "b")
    for client in clients:
        got = [client.read() for _ in range(2000)]
        assert {frame.command for frame in got} == {"MESSAGE"}
        assert len({frame.get("subscription") for frame in got}) == 1000
        assert sorted(frame.body for frame in got) == [b"a"] * 1000 + [b"b"] * 1000
        client.close()


def test_a_subscriber_that_stops_taking_messages_loses_the_oldest_past_its_limit(
    masters: Masters, caplog: pytest.LogCaptureFixture
) -> None:
    master = masters.start()
    slow = StompPy(master.address)
    slow.subscribe(TOPIC, "s", ack="client", **{"activemq.prefetchSize": "1"})
    producer = StompPy(master.address)
    for number in range(100):
        assert producer.send(TOPIC, str(number))
    first = slow.message()
    assert first.body == "0" and slow.no_message()  # prefetch 1: nothing more until an ACK
    got = [first.body]
    frame = first
    for _ in range(LIVE_SUBSCRIPTION_MESSAGES - 1):
        slow.connection.ack(frame.headers["ack"])
        frame = slow.message()
        got.append(frame.body)
    kept = LIVE_SUBSCRIPTION_MESSAGES - 1  # held besides the one delivered, unacknowledged
    assert got == ["0"] + [str(n) for n in range(100 - kept, 100)]
    assert any(codes.TOPIC_MESSAGES_DROPPED in r.getMessage() for r in caplog.records)
