"""BrokerService's life cycle: bind errors, stop, stats, and stopping at once when fenced."""

from __future__ import annotations

import socket
import threading

import pytest

from primacy.broker.service import BrokerService
from primacy.share.posix import PosixShare
from primacy.share.records import EpochRecord
from tests.broker.nodes import Masters, RawClient, eventually, stored_state
from tests.broker.stomppy import StompPy


def broker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "primacy-broker"]


def refused_connection(address: tuple[str, int]) -> bool:
    try:
        socket.create_connection(address, timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_bind_error_raises_in_the_callers_thread_and_leaves_nothing_running(
    masters: Masters,
) -> None:
    master = masters.start()
    second = BrokerService(master.store, "127.0.0.1", master.address[1])
    with pytest.raises(OSError):
        second.start()
    assert len(broker_threads()) == 1
    assert second.stats() == {"running": False}


def test_stop_closes_the_listener_and_every_connection_at_once(masters: Masters) -> None:
    master = masters.start()
    clients = [StompPy(master.address) for _ in range(3)]
    raw = RawClient(master.address)
    raw.connect()
    eventually(lambda: master.service.stats()["connections_open"] == 4, "4 connections")
    master.service.stop()
    assert broker_threads() == []
    frames = raw.read_until_closed()
    assert [f.get("message", "").split()[0] for f in frames] == ["PRIMACY-1518"]
    for client in clients:
        assert client.listener.disconnected.wait(5)
    assert refused_connection(master.address)


def test_stats_count_messages_and_connections(masters: Masters) -> None:
    master = masters.start()
    producer, consumer = StompPy(master.address), StompPy(master.address)
    for n in range(3):
        assert producer.send("/queue/a", "x", **{"message-id": f"m-{n}"})
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    for _ in range(3):
        consumer.message()
    stats = master.service.stats()
    assert stats["running"] is True
    assert stats["messages_in"] == 3
    assert stats["messages_out"] == 3
    assert stats["connections_open"] == 2
    assert stats["messages_ready"] == 0
    producer.close()
    consumer.close()


def test_when_fenced_no_receipt_is_sent_and_every_connection_closes(masters: Masters) -> None:
    master = masters.start()
    producer, bystander = StompPy(master.address), StompPy(master.address)
    assert producer.send("/queue/a", "before", **{"message-id": "m-0"})
    # Another node claims the next epoch: this master's next fencing check fails.
    PosixShare(masters.share).claim_epoch(EpochRecord(0, node_id="node-b"))
    assert not producer.send("/queue/a", "after", **{"message-id": "m-1"})
    assert len(producer.listener.receipts) == 1  # only the send before the fence
    assert producer.listener.disconnected.wait(5)
    assert bystander.listener.disconnected.wait(5)
    eventually(lambda: master.fatal != [], "on_fatal is called")
    assert "JournalFenced" in master.fatal[0]
    assert master.service.stats()["failure"] is not None
    assert refused_connection(master.address)
    # The receipted message is in the journal; the other may be too (written, never
    # acknowledged): its producer resends it and the new master drops the copy.
    master.stop()
    assert "m-0" in stored_state(masters.share).pending["/queue/a"]
