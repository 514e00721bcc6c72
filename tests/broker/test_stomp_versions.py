"""Every STOMP version stomp.py speaks, with its stock connection classes and their defaults.

``stomp.Connection`` (the first line of stomp.py's quick start) speaks 1.1; ``Connection10``
sends no accept-version at all. Each sends with receipts, subscribes in every ack mode its
version has, acknowledges and (from 1.1 on) nacks, on a real broker over a real journal.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import stomp

from tests.broker.nodes import Masters, RawClient, eventually, stored_state
from tests.broker.stomppy import Collector

_receipts = itertools.count(1)

CLASSES = {
    "1.0": stomp.Connection10,
    "1.1": stomp.Connection11,
    "1.2": stomp.Connection12,
    "default": stomp.Connection,
}
VERSION_OF = {"1.0": "1.0", "1.1": "1.1", "1.2": "1.2", "default": "1.1"}
ACK_MODES = {"1.0": ("auto", "client"), "1.1": ("auto", "client", "client-individual")}
ACK_MODES["1.2"] = ACK_MODES["default"] = ACK_MODES["1.1"]


class Client:
    """One stock stomp.py connection of the chosen class, with a collector."""

    def __init__(self, kind: str, address: tuple[str, int]) -> None:
        self.kind = kind
        self.connection = CLASSES[kind]([address])
        self.listener = Collector()
        self.connection.set_listener("collector", self.listener)
        self.connection.connect(wait=True)

    @property
    def version(self) -> str:
        return str(self.connection.version)

    def send(self, destination: str, body: str, message_id: str) -> bool:
        receipt = f"r{next(_receipts)}"
        self.connection.send(
            destination, body, headers={"message-id": message_id, "receipt": receipt}
        )
        return self.listener.wait_receipt(receipt)

    def subscribe(self, destination: str, subscription: str, ack: str) -> None:
        receipt = f"r{next(_receipts)}"
        self.connection.subscribe(destination, subscription, ack=ack, headers={"receipt": receipt})
        assert self.listener.wait_receipt(receipt)

    def message(self) -> Any:
        return self.listener.messages.get(timeout=10)

    def ack(self, message: Any, subscription: str) -> None:
        """Acknowledge the way this version's stomp.py does: 1.2 by ``ack``, older by id."""
        receipt = f"r{next(_receipts)}"
        if self.version == "1.2":
            self.connection.ack(message.headers["ack"], receipt=receipt)
        elif self.version == "1.1":
            self.connection.ack(message.headers["message-id"], subscription, receipt=receipt)
        else:
            self.connection.ack(message.headers["message-id"], receipt=receipt)
        assert self.listener.wait_receipt(receipt), self.listener.errors

    def nack(self, message: Any, subscription: str) -> None:
        receipt = f"r{next(_receipts)}"
        if self.version == "1.2":
            self.connection.nack(message.headers["ack"], receipt=receipt)
        else:
            self.connection.nack(message.headers["message-id"], subscription, receipt=receipt)
        assert self.listener.wait_receipt(receipt), self.listener.errors

    def close(self) -> None:
        if self.connection.is_connected():
            self.connection.disconnect()


def _pending(masters: Masters, destination: str) -> list[str]:
    return sorted(stored_state(masters.share).pending.get(destination, {}))


@pytest.mark.parametrize("kind", list(CLASSES))
def test_each_stock_connection_class_negotiates_its_version_and_sends(
    masters: Masters, kind: str
) -> None:
    master = masters.start()
    client = Client(kind, master.address)
    assert client.version == VERSION_OF[kind]
    # Headers that need escaping from 1.1 on, and none in 1.0.
    assert client.send("/queue/v", "hello", "id:with:colons" if kind != "1.0" else "plain-id")
    assert _pending(masters, "/queue/v") == ["id:with:colons" if kind != "1.0" else "plain-id"]
    client.close()


@pytest.mark.parametrize(
    ("kind", "ack"), [(kind, ack) for kind in CLASSES for ack in ACK_MODES[kind]]
)
def test_every_ack_mode_of_every_version_acknowledges(
    masters: Masters, kind: str, ack: str
) -> None:
    master = masters.start()
    destination = f"/queue/{kind}-{ack}"
    producer = Client(kind, master.address)
    for n in (1, 2):
        assert producer.send(destination, f"m{n}", f"m-{n}")
    consumer = Client(kind, master.address)
    consumer.subscribe(destination, "s1", ack)
    first, second = consumer.message(), consumer.message()
    assert (first.body, second.body) == ("m1", "m2")
    if ack == "auto":
        eventually(lambda: _pending(masters, destination) == [], "auto acks journaled")
    elif ack == "client":  # cumulative: acknowledging the second settles both
        consumer.ack(second, "s1")
        assert _pending(masters, destination) == []
    else:
        consumer.ack(second, "s1")
        assert _pending(masters, destination) == ["m-1"]
        consumer.ack(first, "s1")
        assert _pending(masters, destination) == []
    producer.close()
    consumer.close()


@pytest.mark.parametrize("kind", ["1.1", "1.2", "default"])
def test_a_nack_redelivers_in_every_version_that_has_it(masters: Masters, kind: str) -> None:
    master = masters.start()
    producer = Client(kind, master.address)
    assert producer.send("/queue/n", "again", "m-1")
    consumer = Client(kind, master.address)
    consumer.subscribe("/queue/n", "s1", "client-individual")
    first = consumer.message()
    consumer.nack(first, "s1")
    redelivered = consumer.message()
    assert redelivered.body == "again" and redelivered.headers.get("redelivered") == "true"
    consumer.ack(redelivered, "s1")
    assert _pending(masters, "/queue/n") == []
    producer.close()
    consumer.close()


def test_stomp_1_0_has_no_nack(masters: Masters) -> None:
    client = RawClient(masters.start().address)
    client.send("CONNECT", {"host": "x"})  # no accept-version: STOMP 1.0
    connected = client.read()
    assert connected.command == "CONNECTED" and connected.get("version") == "1.0"
    client.send("NACK", {"message-id": "m-1"})
    error = client.read()
    assert error.command == "ERROR" and "PRIMACY-1506" in error.body.decode()


def test_an_ack_of_a_message_not_delivered_here_is_ignored_as_in_1_2(masters: Masters) -> None:
    # After a failover a 1.1 client may acknowledge what the old master delivered.
    master = masters.start()
    producer = Client("1.1", master.address)
    assert producer.send("/queue/i", "kept", "m-1")
    client = Client("1.1", master.address)
    receipt = f"r{next(_receipts)}"
    client.connection.ack("m-1", "s1", receipt=receipt)
    assert client.listener.wait_receipt(receipt) and client.listener.errors == []
    assert _pending(masters, "/queue/i") == ["m-1"]
    producer.close()
    client.close()
