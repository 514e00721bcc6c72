"""One client cannot exhaust the master: connection, subscription and transaction limits, the
redelivery limit with its dead-letter queue, and destinations forgotten once unused.

Each limit answers with its own ERROR code, names the setting, counts the refusal in the
broker's figures, and stores nothing of the refused frame; other connections go on.
"""

from __future__ import annotations

import pytest

from primacy.broker import codes
from primacy.broker.config import BrokerConfig
from primacy.broker.frames import Frame
from tests.broker.nodes import Masters, RawClient, eventually, stored_state
from tests.broker.stomppy import StompPy


def _error_of(frames: list[Frame]) -> str:
    """The ERROR's ``message`` header (code and title) and its body (the detail)."""
    errors = [frame for frame in frames if frame.command == "ERROR"]
    assert errors, f"no ERROR among {[frame.command for frame in frames]}"
    return f"{errors[-1].get('message')}: {errors[-1].body.decode()}"


def test_a_connection_beyond_max_connections_gets_an_error_and_the_others_go_on(
    masters: Masters,
) -> None:
    master = masters.start(BrokerConfig(max_connections=2, max_connections_per_network=2))
    first, second = StompPy(master.address), StompPy(master.address)
    refused = RawClient(master.address)
    refused.send("CONNECT", {"accept-version": "1.2", "host": "x"})
    message = _error_of(refused.read_until_closed())
    assert message.startswith(codes.CONNECTION_LIMIT) and "at most 2" in message
    assert first.send("/queue/a", "still served")
    assert master.service.stats()["connections_refused"] == 1
    second.close()
    eventually(lambda: master.service.stats()["connections_open"] == 1, "the close to count")
    third = StompPy(master.address)  # room again
    assert third.send("/queue/a", "served too")
    for client in (first, third, refused):
        client.close()


def test_a_subscribe_beyond_the_per_connection_limit_is_refused(masters: Masters) -> None:
    master = masters.start(BrokerConfig(max_subscriptions_per_connection=3))
    client = RawClient(master.address)
    assert client.connect().command == "CONNECTED"
    for number in range(3):
        client.send("SUBSCRIBE", {"id": f"s{number}", "destination": f"/queue/q{number}"})
    client.send("SUBSCRIBE", {"id": "s3", "destination": "/queue/q3", "receipt": "r"})
    message = _error_of(client.read_until_closed())
    assert message.startswith(codes.SUBSCRIPTION_LIMIT)
    assert master.service.stats()["subscriptions_refused"] == 1
    client.close()


def test_a_transaction_past_max_transaction_bytes_ends_the_connection_and_stores_nothing(
    masters: Masters,
) -> None:
    master = masters.start(BrokerConfig(max_transaction_bytes=64 * 1024))
    producer = StompPy(master.address)
    producer.connection.begin("tx1")
    for _ in range(4):  # 3 x 16 KiB (and their headers) fit in 64 KiB; the fourth does not
        producer.connection.send("/queue/a", b"x" * 16 * 1024, transaction="tx1")
    eventually(lambda: bool(producer.listener.errors), "the ERROR")
    message = producer.listener.errors[0].headers["message"]
    assert message.startswith(codes.TRANSACTION_LIMIT)
    eventually(lambda: producer.listener.disconnected.is_set(), "the broker to close")
    assert master.service.stats()["transactions_refused"] == 1
    assert stored_state(masters.share).pending == {}  # nothing of the transaction was stored
    other = StompPy(master.address)
    assert other.send("/queue/a", "others are served")
    other.close()
    producer.close()


def test_open_transactions_beyond_the_limit_are_refused(masters: Masters) -> None:
    master = masters.start(BrokerConfig(max_transactions_per_connection=2))
    client = RawClient(master.address)
    assert client.connect().command == "CONNECTED"
    for name in ("t1", "t2", "t3"):
        client.send("BEGIN", {"transaction": name})
    assert _error_of(client.read_until_closed()).startswith(codes.TRANSACTION_LIMIT)
    client.close()


@pytest.mark.parametrize("how", ["nack", "disconnect"])
def test_a_message_that_keeps_coming_back_moves_to_its_dead_letter_queue(
    masters: Masters, how: str
) -> None:
    master = masters.start(BrokerConfig(max_redeliveries=2))
    producer = StompPy(master.address)
    assert producer.send("/queue/orders", "poison", **{"message-id": "m1", "trace": "t-7"})
    consumer = StompPy(master.address)
    for delivery in range(3):  # the first delivery and two redeliveries, none acknowledged
        if how == "disconnect":
            consumer.close()
            consumer = StompPy(master.address)
        if delivery == 0 or how == "disconnect":
            consumer.subscribe("/queue/orders", "s", ack="client-individual")
        message = consumer.message()
        assert message.headers["message-id"] == "m1"
        assert (message.headers.get("redelivered") == "true") is (delivery > 0)
        if how == "nack":
            assert consumer.frame_with_receipt("nack", message.headers["ack"])
    consumer.close()
    eventually(lambda: master.service.stats()["dead_lettered"] == 1, "the move to the DLQ")

    consumer = StompPy(master.address)
    consumer.subscribe("/queue/orders", "s", ack="client-individual")
    assert consumer.no_message(), "the poison message was delivered again"
    consumer.subscribe("/queue/DLQ.orders", "d", ack="client-individual")
    dead = consumer.message()
    assert dead.body == "poison" and dead.headers["message-id"] == "m1"
    assert dead.headers["trace"] == "t-7"
    assert dead.headers["original-destination"] == "/queue/orders"
    assert "came back unacknowledged 3 times" in dead.headers["dlqDeliveryFailureCause"]
    # The journal holds the DLQ copy only: a new master would find the same.
    pending = stored_state(masters.share).pending
    assert {d: list(m) for d, m in pending.items()} == {"/queue/DLQ.orders": ["m1"]}
    consumer.close()
    producer.close()


def test_destinations_are_forgotten_once_unused(masters: Masters) -> None:
    # Found by trying it: 30 000 SUBSCRIBEs to distinct names were kept for ever, and every
    # dispatch walked them all.
    master = masters.start()
    client = RawClient(master.address)
    assert client.connect().command == "CONNECTED"
    for number in range(300):
        client.send("SUBSCRIBE", {"id": f"s{number}", "destination": f"/queue/n{number}"})
        client.send("UNSUBSCRIBE", {"id": f"s{number}"})
    client.send("SUBSCRIBE", {"id": "kept", "destination": "/queue/kept", "receipt": "r"})
    assert client.read().command == "RECEIPT"
    assert master.service.stats()["destinations"] == 1
    client.close()
    producer = StompPy(master.address)
    assert producer.send("/queue/waiting", "held until consumed")
    eventually(lambda: master.service.stats()["destinations"] == 1, "the closed one forgotten")
    producer.close()


def test_bodies_past_the_memory_limit_stay_in_the_journal_and_are_read_back_in_order(
    masters: Masters,
) -> None:
    # Found by trying it: 400 x 512 KiB with no consumer grew the master by 194 MiB.
    limit = 1024 * 1024
    master = masters.start(BrokerConfig(max_body_memory_bytes=limit))
    producer = StompPy(master.address)
    bodies = [bytes([n]) * 100 * 1024 for n in range(40)]  # 4 MB in all
    for number, body in enumerate(bodies):
        assert producer.send("/queue/big", body, **{"message-id": f"m{number}"})
    held = master.service.stats()["body_memory_bytes"]
    assert 0 < held <= limit
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/big", "s", ack="client-individual", **{"activemq.prefetchSize": "4"})
    for number, body in enumerate(bodies):
        message = consumer.message()
        assert message.headers["message-id"] == f"m{number}"
        assert message.body == body.decode()  # ASCII: stomp.py hands bodies over as text
        assert consumer.frame_with_receipt("ack", message.headers["ack"])
    eventually(lambda: master.service.stats()["body_memory_bytes"] == 0, "every body let go")
    assert stored_state(masters.share).pending == {}
    consumer.close()
    producer.close()
