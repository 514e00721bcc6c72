"""Issue 45 item 4: an ACK is receipted in a round trip, not after the client's delayed ACK;
``primacy consume`` keeps pace with stomp.py's own consumer; it counts what it acknowledged.

The broker's accepted sockets had Nagle's algorithm on (``socket.create_server`` leaves
``proto`` 0, and asyncio disables Nagle only for IPPROTO_TCP sockets): a RECEIPT written
right after the MESSAGE that the ACK let through waited for the client's delayed ACK, 40 ms.
"""

from __future__ import annotations

import json
import re
import socket
import statistics
import threading
import time
from collections.abc import Iterator

import pytest

from primacy.broker.service import tcp_listener
from primacy.cli.exits import EXIT_OK
from primacy.client.consumer import Consumer
from primacy.client.producer import Producer
from tests.broker.nodes import Masters, stored_state
from tests.broker.stomppy import StompPy
from tests.harness.cli import primacy
from tests.harness.group import Group, free_port, wait_until


def test_the_brokers_accepted_sockets_have_nagle_off() -> None:
    listener = tcp_listener(socket.create_server(("127.0.0.1", 0)))
    client = socket.create_connection(listener.getsockname()[:2])
    accepted, _ = listener.accept()
    try:
        assert accepted.proto == socket.IPPROTO_TCP  # what asyncio checks before its own
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        for sock in (accepted, client, listener):
            sock.close()


def test_an_ack_is_receipted_in_a_round_trip(masters: Masters) -> None:
    """One message in flight at a time (prefetch 1): every ACK lets the next MESSAGE go, and
    its RECEIPT follows that MESSAGE. With Nagle on, each took 40-48 ms."""
    master = masters.start()
    url = f"tcp://127.0.0.1:{master.address[1]}"
    producer = Producer(url, window=20)
    for n in range(30):
        producer.send("/queue/rtt", f"m{n}".encode())
    producer.flush()
    producer.close()
    consumer = Consumer(url, "/queue/rtt", prefetch=1)
    waits_ms = []
    try:
        for _ in range(30):
            message = consumer.receive(timeout_s=5)
            assert message is not None
            started = time.monotonic()
            assert consumer.ack(message)
            waits_ms.append((time.monotonic() - started) * 1000)
    finally:
        consumer.close()
    assert statistics.median(waits_ms) < 15, waits_ms
    assert stored_state(masters.share).pending == {}


_SUMMARY = re.compile(
    r"consumed (\d+) \((\d+) distinct, (\d+) duplicate, (\d+) redelivered, "
    r"(\d+) without receipt\), failovers (\d+), ([\d.]+) s"
)


def _summary(stderr: str) -> tuple[int, ...]:
    found = _SUMMARY.search(stderr)
    assert found, stderr
    *counts, elapsed = found.groups()
    return (*map(int, counts), round(float(elapsed) * 1000))


def _stomppy_consume(port: int, queue: str, count: int) -> float:
    """stomp.py's consumer: client-individual acks, the last one receipted; seconds taken."""
    started = time.monotonic()
    client = StompPy(("127.0.0.1", port))
    try:
        client.subscribe(queue, "s", ack="client-individual", **{"activemq.prefetchSize": "100"})
        for n in range(count):
            ack_id = client.message().headers["ack"]
            if n == count - 1:
                assert client.frame_with_receipt("ack", ack_id)
            else:
                client.connection.ack(ack_id)
    finally:
        client.close()
    return time.monotonic() - started


@pytest.mark.slow
def test_primacy_consume_keeps_pace_with_stomppys_consumer(group: Group) -> None:
    """A real node, the real command line and stomp.py on the same queue, in turns; each
    empties a fresh queue of 2000 messages three times; the median turn counts. Before the
    fix `primacy consume` took 40 ms a message (80 s for 2000)."""
    port = free_port()
    node = group.start("n1", "--stomp", f"127.0.0.1:{port}")
    wait_until(node.is_master, 30, "n1 to serve")
    url = f"tcp://127.0.0.1:{port}"
    ours_s, theirs_s = [], []
    for turn in range(6):  # each consumer empties the same fresh queue of 2000, in turns
        sent = primacy("send", url, "/queue/pace", "--count", "2000", "--window", "100")
        assert sent.returncode == EXIT_OK, sent.stderr
        if turn % 2:
            theirs_s.append(_stomppy_consume(port, "/queue/pace", 2000))
            continue
        consumed = primacy(
            "consume", url, "/queue/pace", "--count", "2000", "--quiet", "--json", timeout_s=90
        )
        assert consumed.returncode == EXIT_OK, consumed.stderr
        summary = json.loads(consumed.stdout)
        assert (summary["consumed"], summary["distinct"]) == (2000, 2000)
        ours_s.append(summary["elapsed_s"])
    # Keeping pace: both are bound by the broker (its journal), so a shared machine's noise
    # decides between near-equal figures. The regression this guards against was 80 times
    # slower; a 15 % margin failed a full run on a loaded machine (medians 0.64 s against
    # 0.50 s, single turns from 0.38 to 1.26 s), so twice the median is the line. How fast
    # against stomp.py is a benchmark's question (bench/, docs/benchmarks.md), not this test's.
    assert statistics.median(ours_s) <= 2 * statistics.median(theirs_s), (ours_s, theirs_s)


class _AckCutter:
    """A proxy between a consumer and the broker that, after forwarding the client's
    ``after``-th ACK, forwards nothing more back, waits for the broker to journal what it got,
    and cuts that connection: the ACKs in flight are journaled and never receipted. Later
    connections are forwarded whole."""

    def __init__(self, target_port: int, after: int) -> None:
        self.target_port, self.after = target_port, after
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cuts = 0
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._spawn(self._accept)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self.target_port))
            frozen = threading.Event()
            self._spawn(self._upstream, client, broker, frozen, self.cuts == 0)
            self._spawn(self._downstream, broker, client, frozen)

    def _upstream(
        self, client: socket.socket, broker: socket.socket, frozen: threading.Event, cut: bool
    ) -> None:
        seen, tail = 0, b""
        while data := _recv(client):
            seen += (tail + data).count(b"\x00ACK\n")
            tail = data[-4:]
            if cut and seen >= self.after:
                frozen.set()  # no RECEIPT of these ACKs reaches the client
                broker.sendall(data)
                time.sleep(0.5)  # the broker journals them
                self.cuts += 1
                for sock in (client, broker):
                    sock.close()
                return
            broker.sendall(data)

    def _downstream(
        self, broker: socket.socket, client: socket.socket, frozen: threading.Event
    ) -> None:
        while (data := _recv(broker)) and not frozen.is_set():
            try:
                client.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self._closed = True
        self.listener.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


@pytest.fixture
def cutter(group: Group) -> Iterator[tuple[_AckCutter, str]]:
    port = free_port()
    node = group.start("n1", "--stomp", f"127.0.0.1:{port}")
    wait_until(node.is_master, 30, "n1 to serve")
    sent = primacy("send", f"tcp://127.0.0.1:{port}", "/queue/cut", "--count", "300")
    assert sent.returncode == EXIT_OK, sent.stderr
    proxy = _AckCutter(port, after=100)
    try:
        yield proxy, f"failover:(tcp://127.0.0.1:{proxy.port})?initialReconnectDelay=10"
    finally:
        proxy.close()


@pytest.mark.slow
def test_consume_counts_the_acks_a_failover_left_without_receipt(
    cutter: tuple[_AckCutter, str], group: Group
) -> None:
    """Issue 45 item 8: after a fencing episode `consume --count 3000` said 2 998 while the
    journal held all 3 000 ACKs. The ACKs whose receipts the cut lost were journaled: the
    broker does not deliver those messages again, and consume counts them."""
    proxy, url = cutter
    consumed = primacy(
        "consume", url, "/queue/cut", "--count", "300", "--quiet", "--idle-timeout-s", "3"
    )
    assert proxy.cuts == 1
    assert consumed.returncode == EXIT_OK, consumed.stderr
    count, distinct, duplicate, _, without_receipt, failovers, _ = _summary(consumed.stderr)
    assert (count, distinct, duplicate, failovers) == (300, 300, 0, 1)
    assert without_receipt >= 1
    assert stored_state(group.share).pending == {}
