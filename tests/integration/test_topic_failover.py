"""A durable topic subscription across a kill -9 of the master: real supervisor processes, stock
stomp.py. What the subscriber had not acknowledged, and what was sent while it was away, reaches
it from the new master once each; a resend of a receipted topic SEND is not delivered again."""

from __future__ import annotations

import signal
from typing import Any

import pytest
import stomp

from tests.broker.stomppy import Collector, StompPy
from tests.harness.group import Group, free_port, wait_until

pytestmark = pytest.mark.slow

TOPIC = "/topic/ledger"
DURABLE = {"activemq.subscriptionName": "audit"}


def subscriber(address: tuple[str, int]) -> tuple[Any, Collector]:
    connection = stomp.Connection12([address], heartbeats=(0, 0))
    listener = Collector()
    connection.set_listener("collector", listener)
    connection.connect(wait=True, headers={"client-id": "books"})
    connection.subscribe(TOPIC, "d1", ack="client-individual", headers={**DURABLE, "receipt": "s"})
    assert listener.wait_receipt("s")
    return connection, listener


def test_a_durable_subscriber_gets_its_messages_from_the_new_master_after_kill_9(
    group: Group,
) -> None:
    ports = {node_id: free_port() for node_id in ("n1", "n2")}
    nodes = {n: group.start(n, "--stomp", f"127.0.0.1:{p}") for n, p in ports.items()}
    old = group.wait_for_master(timeout_s=20)
    address = ("127.0.0.1", ports[old.node_id])
    connection, listener = subscriber(address)
    producer = StompPy(address)
    assert producer.send(TOPIC, "one", **{"message-id": "m1"})
    assert producer.send(TOPIC, "two", **{"message-id": "m2"})
    first = [listener.messages.get(timeout=10) for _ in range(2)]
    connection.ack(first[0].headers["ack"], receipt="a1")
    assert listener.wait_receipt("a1")
    connection.disconnect()  # away: "two" unacknowledged, "three" comes while it is gone
    assert producer.send(TOPIC, "three", **{"message-id": "m3"})

    old.signal(signal.SIGKILL)
    new = group.wait_for_master(timeout_s=30, exclude={old.node_id})
    address = ("127.0.0.1", ports[new.node_id])
    wait_until(lambda: new.status("/master") == 200, 20, "the new master serving")
    producer = StompPy(address)
    assert producer.send(TOPIC, "three", **{"message-id": "m3"})  # a resend: dropped
    assert producer.send(TOPIC, "four", **{"message-id": "m4"})
    connection, listener = subscriber(address)
    got = [listener.messages.get(timeout=10) for _ in range(3)]
    assert [(m.body, m.headers.get("redelivered")) for m in got] == [
        ("two", "true"),
        ("three", "true"),
        ("four", None),
    ]
    assert {m.headers["destination"] for m in got} == {TOPIC}
    for message in got:
        connection.ack(message.headers["ack"])
    connection.disconnect(receipt="bye")
    assert listener.messages.empty()
    assert set(nodes) == {old.node_id, new.node_id}
