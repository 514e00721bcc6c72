"""Producer flow control, seen from stock stomp.py clients: a SEND to a full destination (or a
full broker) waits until acknowledgements make room, or gets PRIMACY-1524 when it asked not to
wait or waited too long; nothing refused is stored, nothing held is lost or reordered."""

from __future__ import annotations

import time

from primacy.broker import codes
from primacy.broker.config import BrokerConfig
from tests.broker.nodes import Masters, eventually, stored_send_ids
from tests.broker.stomppy import StompPy


def _fill(producer: StompPy, destination: str, count: int) -> None:
    for number in range(count):
        assert producer.send(destination, f"m{number}", **{"message-id": f"{destination}-{number}"})


def _send_async(producer: StompPy, destination: str, message_id: str, receipt: str) -> None:
    producer.connection.send(
        destination, message_id, headers={"message-id": message_id, "receipt": receipt}
    )


def test_a_send_to_a_full_destination_waits_until_an_ack_makes_room(masters: Masters) -> None:
    # Heart-beats every 300 ms, a client cut off after 600 ms of silence (stomp.py gives up
    # on the broker after 450 ms): a wait far longer than that must not cost the producer
    # its connection. (At 100 ms a loaded CI machine let a beat come 255 ms late.)
    config = BrokerConfig(
        max_destination_messages=2, heart_beat_send_ms=300, heart_beat_receive_ms=300
    )
    master = masters.start(config)
    producer = StompPy(master.address, heartbeats=(300, 300))
    _fill(producer, "/queue/a", 2)
    _send_async(producer, "/queue/a", "waits", "r-waits")
    _send_async(producer, "/queue/b", "behind", "r-behind")  # held behind it, in order
    eventually(lambda: master.service.stats()["sends_waiting"] == 1, "the SEND to wait")
    time.sleep(1.5)  # five heart-beat periods
    assert producer.connection.is_connected() and not producer.listener.errors
    assert "r-waits" not in producer.listener.receipts
    assert "r-behind" not in producer.listener.receipts
    assert set(stored_send_ids(masters.share)) == {"/queue/a-0", "/queue/a-1"}

    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s", ack="client-individual")
    first = consumer.message()
    assert consumer.frame_with_receipt("ack", first.headers["ack"])
    assert producer.listener.wait_receipt("r-waits")
    assert producer.listener.wait_receipt("r-behind")
    assert sorted(stored_send_ids(masters.share)) == [
        "/queue/a-0",
        "/queue/a-1",
        "behind",
        "waits",
    ]
    stats = master.service.stats()
    assert stats["sends_held"] == 1 and stats["sends_waiting"] == 0
    assert stats["sends_refused_full"] == 0
    assert producer.send("/queue/b", "reads again")
    for client in (producer, consumer):
        client.close()


def test_if_full_error_gets_an_error_at_once_and_stores_nothing(masters: Masters) -> None:
    master = masters.start(BrokerConfig(max_destination_messages=1))
    producer = StompPy(master.address)
    _fill(producer, "/queue/a", 1)
    assert not producer.send("/queue/a", "refused", **{"message-id": "no", "if-full": "error"})
    error = producer.listener.errors[0]
    assert error.headers["message"].startswith(codes.DESTINATION_FULL)
    assert "max_destination_messages 1" in error.body and "nothing was stored" in error.body
    assert "no" not in stored_send_ids(masters.share)
    assert master.service.stats()["sends_refused_full"] == 1
    other = StompPy(master.address)
    assert other.send("/queue/b", "another destination has room")
    for client in (producer, other):
        client.close()


def test_a_send_that_waits_past_the_timeout_gets_an_error_and_stores_nothing(
    masters: Masters,
) -> None:
    master = masters.start(BrokerConfig(max_destination_messages=1, flow_control_timeout_s=0.5))
    producer = StompPy(master.address)
    _fill(producer, "/queue/a", 1)
    assert not producer.send("/queue/a", "too late", **{"message-id": "late"})
    error = producer.listener.errors[0]
    assert error.headers["message"].startswith(codes.DESTINATION_FULL)
    assert "waited 0.5 s" in error.body
    eventually(lambda: producer.listener.disconnected.is_set(), "the broker to close")
    assert "late" not in stored_send_ids(masters.share)
    stats = master.service.stats()
    assert stats["sends_refused_full"] == 1 and stats["sends_waiting"] == 0
    producer.close()


def test_the_broker_wide_limit_counts_every_destination_and_recovered_messages(
    masters: Masters,
) -> None:
    master = masters.start(BrokerConfig(max_pending_messages=3))
    producer = StompPy(master.address)
    for destination in ("/queue/a", "/queue/b", "/queue/c"):
        assert producer.send(destination, "x")
    producer.close()
    # A new master finds the three in the journal: they fill it as they filled the old one.
    master = masters.failover(master, config=BrokerConfig(max_pending_messages=3))
    producer = StompPy(master.address)
    assert not producer.send("/queue/d", "refused", **{"if-full": "error"})
    assert "max_pending_messages 3" in producer.listener.errors[0].body
    producer.close()

    consumer = StompPy(master.address)
    consumer.subscribe("/queue/b", "s", ack="client-individual")
    assert consumer.frame_with_receipt("ack", consumer.message().headers["ack"])
    producer = StompPy(master.address)
    assert producer.send("/queue/d", "room again", **{"if-full": "error"})
    for client in (producer, consumer):
        client.close()


def test_a_transactional_send_waits_too_and_the_commit_stores_it(masters: Masters) -> None:
    master = masters.start(BrokerConfig(max_destination_messages=1))
    producer = StompPy(master.address)
    _fill(producer, "/queue/a", 1)
    producer.connection.begin("tx")
    producer.connection.send("/queue/a", "in tx", headers={"message-id": "tx-1"}, transaction="tx")
    producer.connection.commit("tx", receipt="r-commit")
    eventually(lambda: master.service.stats()["sends_waiting"] == 1, "the SEND to wait")
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s", ack="client-individual")
    assert consumer.frame_with_receipt("ack", consumer.message().headers["ack"])
    assert producer.listener.wait_receipt("r-commit")
    assert "tx-1" in stored_send_ids(masters.share)
    for client in (producer, consumer):
        client.close()
