"""The comparison's drain acknowledges each message after counting it (``ack:client-individual``).

Issue 47: the drain subscribed with ``ack:auto``, so when a failover cut its connection the
messages ActiveMQ had already pushed into its socket were acknowledged and never read, and the
benchmark reported them lost. The drain (stomp.py, as the benchmark runs it) talks here to a
small STOMP peer on a real socket that records the frames it gets: which ack mode a client
subscribed with, and which messages it acknowledged, is what the test checks, and no broker
shows it. The peer cuts the first connection after delivering three messages, of which the
drain acknowledged only what it read, and delivers the rest to the next connection.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from bench.activemq.workload import ID_HEADER, drain
from bench.soak import counting_consumer
from primacy.broker.frames import Frame, FrameParser, encode
from tests.harness.group import wait_until

pytestmark = pytest.mark.slow
QUEUE = "/queue/drained"


class StompPeer:
    """Delivers ``messages`` in order, ``per_connection`` per connection, then cuts it."""

    def __init__(self, messages: list[str], per_connection: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()
        self.pending = list(messages)
        self.per_connection = per_connection
        self.subscriptions: list[dict[str, str]] = []
        self.acks: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                self._session(conn)

    def _session(self, conn: socket.socket) -> None:
        parser = FrameParser()
        acked_here: list[str] = []
        sent: list[str] = []
        while True:
            data = conn.recv(65536)
            if not data:
                break
            for frame in parser.feed(data):
                if frame.command in ("CONNECT", "STOMP"):
                    conn.sendall(encode(Frame.make("CONNECTED", {"version": "1.2"})))
                elif frame.command == "SUBSCRIBE":
                    self.subscriptions.append(frame.header_dict())
                    sent = self.pending[: self.per_connection]
                    for bench_id in sent:
                        headers = {
                            "subscription": frame.get("id") or "",
                            "message-id": bench_id,
                            "destination": QUEUE,
                            "ack": f"ack-{bench_id}",
                            ID_HEADER: bench_id,
                        }
                        conn.sendall(encode(Frame.make("MESSAGE", headers, b"x")))
                elif frame.command == "ACK":
                    acked = (frame.get("id") or "").removeprefix("ack-")
                    self.acks.append(acked)
                    acked_here.append(acked)
                    if sent and set(acked_here) >= set(sent) and len(self.pending) > len(sent):
                        # Every message this connection carried is read: cut it, as a
                        # failover does, with the rest still to come.
                        self.pending = [m for m in self.pending if m not in acked_here]
                        return
                elif frame.command == "DISCONNECT":
                    if receipt := frame.get("receipt"):
                        conn.sendall(encode(Frame.make("RECEIPT", {"receipt-id": receipt})))
                    return
        # Cut before everything sent here was acknowledged: the rest comes again.
        self.pending = [m for m in self.pending if m not in acked_here]

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def peer() -> Iterator[StompPeer]:
    stomp_peer = StompPeer([f"m{n}" for n in range(6)], per_connection=3)
    yield stomp_peer
    stomp_peer.close()


def test_the_drain_acknowledges_each_message_after_counting_it(peer: StompPeer) -> None:
    delivered = drain(lambda: peer.address, QUEUE, idle_s=0.5, limit_s=30)
    assert {s.get("ack") for s in peer.subscriptions} == {"client-individual"}
    assert len(peer.subscriptions) == 2  # the cut connection was opened again
    assert delivered == {f"m{n}": 1 for n in range(6)}
    assert sorted(peer.acks) == sorted(delivered)  # each one acknowledged, once


def test_the_soak_consumer_acknowledges_each_message_after_counting_it() -> None:
    """bench/soak.py's consumer subscribed with ``ack:auto`` too: it shares the drain's
    subscription now, and acknowledges what it counted, each message on its own."""
    stomp_peer = StompPeer([f"m{n}" for n in range(6)], per_connection=6)  # no cut
    stop, consumed = threading.Event(), SimpleNamespace(value=0)
    consumer = threading.Thread(
        target=counting_consumer, args=(stomp_peer.address, 1000.0, stop, consumed)
    )
    consumer.start()
    try:
        wait_until(lambda: len(stomp_peer.acks) == 6, 10, "every message acknowledged")
    finally:
        stop.set()
        consumer.join(10)
        stomp_peer.close()
    assert [s.get("ack") for s in stomp_peer.subscriptions] == ["client-individual"]
    assert consumed.value == 6
    assert sorted(stomp_peer.acks) == [f"m{n}" for n in range(6)]
