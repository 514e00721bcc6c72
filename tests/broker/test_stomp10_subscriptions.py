"""STOMP 1.0's subscription rules with stock stomp.py ``StompConnection10``: a SUBSCRIBE needs
only ``destination`` and an UNSUBSCRIBE may name the destination instead of the id (the 1.0
specification); 1.1 and 1.2 still require the id. The peer suite's ``test_s10.py::testsend10``
(stomp.py's own tests, run against ActiveMQ) does exactly the first."""

from __future__ import annotations

import itertools

import stomp

from tests.broker.nodes import Masters, RawClient, stored_state
from tests.broker.stomppy import Collector

_receipts = itertools.count(1)


def _connect(kind: type, address: tuple[str, int]) -> tuple[stomp.Connection, Collector]:
    connection = kind([address])
    listener = Collector()
    connection.set_listener("collector", listener)
    connection.connect(wait=True)
    return connection, listener


def _receipted(listener: Collector, call: object, *args: object, **kwargs: object) -> bool:
    receipt = f"r{next(_receipts)}"
    call(*args, receipt=receipt, **kwargs)  # type: ignore[operator]
    return listener.wait_receipt(receipt)


def test_a_1_0_subscribe_without_id_receives_and_unsubscribes_by_destination(
    masters: Masters,
) -> None:
    master = masters.start()
    connection, listener = _connect(stomp.Connection10, master.address)
    # stomp.py 1.0's subscribe(destination, id=None, ack): no id header is sent at all.
    receipt = f"r{next(_receipts)}"
    connection.subscribe(destination="/queue/s10", ack="auto", headers={"receipt": receipt})
    assert listener.wait_receipt(receipt), [e.body for e in listener.errors]
    assert _receipted(listener, connection.send, "/queue/s10", "this is a test using 1.0")
    message = listener.messages.get(timeout=10)
    assert message.body == "this is a test using 1.0"
    assert "subscription" not in message.headers  # 1.0 sends it only when an id was given
    # UNSUBSCRIBE by destination alone: the subscription ends, later messages wait.
    assert _receipted(listener, connection.unsubscribe, destination="/queue/s10")
    assert _receipted(listener, connection.send, "/queue/s10", "after")
    assert listener.messages.empty() and listener.errors == []
    assert len(stored_state(masters.share).pending["/queue/s10"]) == 1
    connection.disconnect()


def test_a_1_0_client_ack_without_id_settles_the_message(masters: Masters) -> None:
    master = masters.start()
    connection, listener = _connect(stomp.Connection10, master.address)
    assert _receipted(listener, connection.send, "/queue/c10", "m", headers={"message-id": "m-1"})
    receipt = f"r{next(_receipts)}"
    connection.subscribe(destination="/queue/c10", ack="client", headers={"receipt": receipt})
    assert listener.wait_receipt(receipt)
    message = listener.messages.get(timeout=10)
    assert _receipted(listener, connection.ack, message.headers["message-id"])
    assert stored_state(masters.share).pending.get("/queue/c10", {}) == {}
    connection.disconnect()


def test_unsubscribe_by_destination_with_nothing_subscribed_is_refused(masters: Masters) -> None:
    client = RawClient(masters.start().address)
    client.send("CONNECT", {"host": "x"})  # no accept-version: STOMP 1.0
    assert client.read().get("version") == "1.0"
    client.send("UNSUBSCRIBE", {"destination": "/queue/none"})
    error = client.read()
    assert error.command == "ERROR" and "PRIMACY-1510" in error.body.decode()


def test_1_1_and_1_2_still_require_the_subscription_id(masters: Masters) -> None:
    master = masters.start()
    for version in ("1.1", "1.2"):
        client = RawClient(master.address)
        client.send("CONNECT", {"accept-version": version, "host": "x"})
        assert client.read().get("version") == version
        client.send("SUBSCRIBE", {"destination": "/queue/ids"})
        error = client.read()
        assert error.command == "ERROR" and "needs a id header" in error.body.decode()
        client.sock.close()
