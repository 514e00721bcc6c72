"""Our own producer and consumer against BrokerService, through an in-process failover."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from primacy.broker.frames import FrameParser
from primacy.cli.localgroup import free_port
from primacy.client import wire
from primacy.client.consumer import Consumer
from primacy.client.errors import BrokerRefused
from primacy.client.producer import Producer
from tests.broker.nodes import Masters, eventually, stored_send_ids, stored_state

# Anything but the control characters the broker's codec refuses in headers.
_chars = st.characters(
    blacklist_categories=("Cs",), blacklist_characters=[*map(chr, range(32)), "\x7f"]
) | st.sampled_from("\t\r\n")
header_text = st.text(_chars, max_size=20).filter(lambda t: t != "content-length")


@given(
    st.sampled_from(["SEND", "ACK", "SUBSCRIBE"]),
    st.dictionaries(header_text, st.text(_chars, max_size=20), max_size=5),
    st.binary(max_size=100),
)
def test_the_clients_frames_parse_as_the_broker_reads_them(
    command: str, headers: dict[str, str], body: bytes
) -> None:
    [frame] = FrameParser().feed(wire.client_frame(command, headers, body))
    expected = dict(headers)
    if body:
        expected["content-length"] = str(len(body))
    assert (frame.command, frame.header_dict(), frame.body) == (command, expected, body)


def test_a_header_the_broker_would_refuse_fails_the_send_and_leaves_nothing_pending(
    masters: Masters,
) -> None:
    master = masters.start()
    producer = Producer(url_of(master.address[1]))
    try:
        with pytest.raises(ValueError, match="control character"):
            producer.send("/queue/a", b"x", {"trace": "a\x00b"})
        assert (producer.sent, len(producer.unreceipted)) == (0, 0)
        message_id = producer.send("/queue/a", b"y")
        assert stored_send_ids(masters.share) == [message_id]
    finally:
        producer.close()


def url_of(*ports: int) -> str:
    addresses = ",".join(f"tcp://127.0.0.1:{port}" for port in ports)
    return f"failover:({addresses})?initialReconnectDelay=10&maxReconnectDelay=200&randomize=false"


def test_produce_and_consume_with_receipts_and_acks(masters: Masters) -> None:
    master = masters.start()
    producer = Producer(url_of(master.address[1]))
    ids = [producer.send("/queue/a", f"m{n}".encode(), {"n": str(n)}) for n in range(5)]
    consumer = Consumer(url_of(master.address[1]), "/queue/a")
    got = []
    while (message := consumer.receive(timeout_s=0.5)) is not None:
        got.append(message)
        assert consumer.ack(message)
    assert [m.message_id for m in got] == ids
    assert [m.body for m in got] == [f"m{n}".encode() for n in range(5)]
    assert got[2].headers["n"] == "2"
    assert stored_state(masters.share).pending == {}
    producer.close()
    consumer.close()


def test_a_refused_message_raises_and_the_producer_goes_on(masters: Masters) -> None:
    master = masters.start(max_message_size=1024)
    producer = Producer(url_of(master.address[1]))
    with pytest.raises(BrokerRefused, match="PRIMACY-1507"):
        producer.send("/queue/a", b"x" * 4096)
    producer.send("/queue/a", b"small", message_id="ok")
    assert list(stored_state(masters.share).pending["/queue/a"]) == ["ok"]
    producer.close()


def test_sends_without_receipt_are_resent_after_failover_and_stored_once(masters: Masters) -> None:
    old = masters.start()
    second_port = free_port()
    url = url_of(old.address[1], second_port)
    producer = Producer(url, window=100)
    first = [producer.send("/queue/a", b"x") for _ in range(30)]
    assert len(producer.unreceipted) == 30  # none awaited yet: all in flight at the takeover
    eventually(lambda: old.service.stats()["messages_in"] == 30, "the old master stores them")
    new = masters.failover(old, port=second_port)
    second = [producer.send("/queue/a", b"y") for _ in range(30)]
    producer.flush()
    assert producer.failover.reconnects == 1
    assert producer.resent >= 30
    stored = stored_send_ids(masters.share)
    assert sorted(stored) == sorted(first + second)  # each id once
    assert new.service.stats()["duplicates_dropped"] == 30
    producer.close()


def test_the_consumer_resubscribes_and_gets_unacked_messages_again(masters: Masters) -> None:
    old = masters.start()
    second_port = free_port()
    url = url_of(old.address[1], second_port)
    producer = Producer(url, window=20)
    sent = [producer.send("/queue/a", f"{n}".encode()) for n in range(20)]
    producer.flush()
    consumer = Consumer(url, "/queue/a", prefetch=5)
    acked: set[str] = set()
    for _ in range(6):
        message = consumer.receive(timeout_s=5)
        assert message is not None
        if len(acked) < 3:
            assert consumer.ack(message)
            acked.add(message.message_id)
    masters.failover(old, port=second_port)
    redelivered: set[str] = set()
    while (message := consumer.receive(timeout_s=1.0)) is not None:
        # Deliveries buffered from the old connection can no longer be acknowledged.
        if consumer.ack(message):
            assert message.redelivered  # everything the new master recovered may have been seen
            redelivered.add(message.message_id)
    assert consumer.failover.reconnects == 1
    assert redelivered == set(sent) - acked
    assert stored_state(masters.share).pending == {}
    producer.close()
    consumer.close()
