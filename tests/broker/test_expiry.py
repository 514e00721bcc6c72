"""Message expiry with stock stomp.py: the ``expires`` header (ms since the Unix epoch, as
ActiveMQ writes it) is honoured. An expired message is never delivered, is counted, and leaves
the journal (an ACK record), so a new master does not bring it back; a persistent one
(``persistent:true``) moves to its dead-letter queue first, as ActiveMQ's does. A message
already expired on arrival is never stored, so a flood of them costs nothing."""

from __future__ import annotations

from typing import Any

from primacy.broker.expiry import now_ms
from tests.broker.nodes import Masters, RawClient, eventually, stored_state
from tests.broker.stomppy import StompPy


def _pending(masters: Masters, destination: str) -> list[str]:
    return sorted(stored_state(masters.share).pending.get(destination, {}))


def _first_message_after(client: StompPy, destination: str, sender: StompPy) -> Any:
    """Subscribe, then send a marker: the first MESSAGE shows whether anything came before."""
    client.subscribe(destination, "s")
    assert sender.send(destination, "marker", **{"message-id": "marker"})
    return client.message()


def test_a_message_expired_on_arrival_is_receipted_never_stored_nor_delivered(
    masters: Masters,
) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    assert producer.send("/queue/late", "too late", expires=str(now_ms() - 1))
    assert _pending(masters, "/queue/late") == []
    consumer = StompPy(master.address)
    assert _first_message_after(consumer, "/queue/late", producer).body == "marker"
    assert master.service.stats()["messages_expired"] == 1
    producer.close()
    consumer.close()


def test_a_flood_of_expired_messages_holds_nothing(masters: Masters) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    past = str(now_ms() - 1000)
    for n in range(500):
        producer.connection.send(f"/queue/flood{n % 50}", "x" * 1024, headers={"expires": past})
    assert producer.send("/queue/flood0", "last", expires=past)  # receipts come in order
    stats = master.service.stats()
    assert stats["messages_expired"] == 501
    assert (stats["body_memory_bytes"], stats["messages_unacknowledged"]) == (0, 0)
    assert stats["destinations"] == 0
    assert stored_state(masters.share).pending == {}
    producer.close()


def test_a_persistent_message_expired_on_arrival_goes_to_the_dead_letter_queue(
    masters: Masters,
) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    expired = str(now_ms() - 1)
    assert producer.send(
        "/queue/orders", "old order", expires=expired, persistent="true", **{"message-id": "o-1"}
    )
    assert _pending(masters, "/queue/orders") == []
    assert _pending(masters, "/queue/DLQ.orders") == ["o-1"]
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/DLQ.orders", "dlq")
    copy = consumer.message()
    assert copy.body == "old order"
    assert copy.headers["original-destination"] == "/queue/orders"
    assert "expired" in copy.headers["dlqDeliveryFailureCause"]
    assert "expires" not in copy.headers  # it must not expire again on the DLQ
    stats = master.service.stats()
    assert (stats["messages_expired"], stats["dead_lettered"]) == (1, 0)
    producer.close()
    consumer.close()


def test_a_waiting_message_expires_and_leaves_the_journal(masters: Masters) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    soon = now_ms() + 200
    assert producer.send("/queue/idle", "short-lived", expires=str(soon), **{"message-id": "s"})
    assert producer.send("/queue/idle", "kept", expires="0", **{"message-id": "k"})  # 0: never
    assert _pending(masters, "/queue/idle") == ["k", "s"]
    # Nobody consumes: the sweep takes it out once it passed, settled in the journal.
    eventually(lambda: master.service.stats()["messages_expired"] == 1, "the sweep")
    eventually(lambda: _pending(masters, "/queue/idle") == ["k"], "its ACK journaled")
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/idle", "s")
    assert consumer.message().body == "kept"
    producer.close()
    consumer.close()


def test_a_persistent_message_expiring_in_its_queue_moves_to_the_dead_letter_queue(
    masters: Masters,
) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    soon = now_ms() + 200
    assert producer.send(
        "/queue/p", "kept for audit", expires=str(soon), persistent="true", **{"message-id": "p"}
    )
    eventually(lambda: _pending(masters, "/queue/DLQ.p") == ["p"], "the move to the DLQ")
    assert _pending(masters, "/queue/p") == []
    stats = master.service.stats()
    assert (stats["messages_expired"], stats["dead_lettered"]) == (1, 0)
    producer.close()


def test_a_message_not_yet_expired_is_delivered_with_its_header(masters: Masters) -> None:
    master = masters.start()
    client = StompPy(master.address)
    later = str(now_ms() + 3_600_000)
    assert client.send("/queue/fresh", "in time", expires=later)
    client.subscribe("/queue/fresh", "s")
    message = client.message()
    assert (message.body, message.headers["expires"]) == ("in time", later)
    assert master.service.stats()["messages_expired"] == 0
    client.close()


def test_after_a_failover_an_expired_message_is_not_delivered(masters: Masters) -> None:
    # The new master recovers the message without its headers (its body stays in the
    # journal); it must read the expiry with the body and not resurrect it.
    first = masters.start()
    producer = StompPy(first.address)
    expires = now_ms() + 1000
    assert producer.send("/queue/f", "stale", expires=str(expires), **{"message-id": "stale"})
    producer.close()
    second = masters.failover(first)
    assert _pending(masters, "/queue/f") == ["stale"]  # recovered as pending
    eventually(lambda: now_ms() > expires, "the expiry passing", timeout_s=5)
    sender = StompPy(second.address)
    consumer = StompPy(second.address)
    assert _first_message_after(consumer, "/queue/f", sender).body == "marker"
    eventually(lambda: _pending(masters, "/queue/f") == [], "the expired one settled")
    assert second.service.stats()["messages_expired"] == 1
    sender.close()
    consumer.close()


def test_an_expires_that_is_not_a_time_is_refused(masters: Masters) -> None:
    client = RawClient(masters.start().address)
    client.connect()
    client.send("SEND", {"destination": "/queue/bad", "expires": "tomorrow"}, b"x")
    error = client.read()
    assert error.command == "ERROR" and "PRIMACY-1510" in error.body.decode()
    assert "expires" in error.body.decode()
