"""The benchmarks' stock stomp.py client takes a socket gone under a send as a lost connection.

stomp.py's transport checks ``self.socket is not None`` and then calls
``self.socket.sendall``; when its receiver thread drops the socket in between (the broker
went away), the send raises AttributeError on None instead of NotConnectedException. It
escaped ``StockStompClient`` (bench/lb_failover.py alone worked around it). That
interleaving cannot be had on demand, so the test makes it happen inside stomp.py's own
send, on a real socket to a small STOMP peer: the connection's transport finds its socket
at the check and not at the call, as when the receiver thread's cleanup runs between them
(the one stand-in here). The client must connect again and send the message again.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import stomp

from bench.activemq.workload import ID_HEADER, StockStompClient
from primacy.broker.frames import Frame, FrameParser, encode

QUEUE = "/queue/stock"


class ReceiptingPeer:
    """Answers CONNECT, and every SEND with its receipt; records the bench ids it got."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()
        self.received: list[str] = []
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        parser = FrameParser()
        with conn:
            while data := _recv(conn):
                for frame in parser.feed(data):
                    replies = []
                    if frame.command in ("CONNECT", "STOMP"):
                        replies.append(Frame.make("CONNECTED", {"version": "1.2"}))
                    elif frame.command == "SEND":
                        self.received.append(frame.get(ID_HEADER) or "")
                    if receipt := frame.get("receipt"):
                        replies.append(Frame.make("RECEIPT", {"receipt-id": receipt}))
                    if not all(_send(conn, reply) for reply in replies):
                        return  # the client is gone (the tests break its socket on purpose)

    def close(self) -> None:
        self.listener.close()
        for conn in self.connections:  # the stomp.py connections' receivers see the end
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _send(conn: socket.socket, frame: Frame) -> bool:
    try:
        conn.sendall(encode(frame))
    except OSError:
        return False
    return True


def _recv(conn: socket.socket) -> bytes:
    try:
        return conn.recv(65536)
    except OSError:
        return b""


def _socket_gone_at_the_next_send(connection: stomp.Connection12) -> None:
    """The next SEND on ``connection`` runs stomp.py's own ``send``, whose second look at
    ``self.socket`` (the call, after the check) finds it gone; every other read, the
    receiver thread's included, sees the real socket until then."""
    transport = connection.transport
    real = transport.__dict__.pop("socket")
    sender: list[threading.Thread] = []
    looks = [0]

    def get(self: Any) -> Any:
        if sender and threading.current_thread() is sender[0]:
            looks[0] += 1
            if looks[0] >= 2:
                return None
        return real

    def set_(self: Any, value: Any) -> None:
        nonlocal real
        real = value

    def send(self: Any, encoded: bytes) -> None:
        if encoded.startswith(b"SEND") and not sender:
            sender.append(threading.current_thread())
        base.send(self, encoded)

    base = type(transport)
    transport.__class__ = type("SocketGoneMidSend", (base,), {"socket": property(get, set_),
                                                               "send": send})  # fmt: skip


@pytest.fixture
def peer() -> Iterator[ReceiptingPeer]:
    made = ReceiptingPeer()
    yield made
    made.close()


def test_a_socket_gone_under_a_send_is_a_lost_connection(peer: ReceiptingPeer) -> None:
    client = StockStompClient([peer.address])
    try:
        client.send(QUEUE, "b-1")  # connected, receipted
        assert client._connection is not None
        _socket_gone_at_the_next_send(client._connection)
        client.send(QUEUE, "b-2")  # AttributeError inside stomp.py: connect, send again
        assert client.generation == 2
        assert peer.received == ["b-1", "b-2"]
        assert len(peer.connections) == 2
    finally:
        client.close()
