"""Issue 45 item 4: an ACK is receipted in a round trip, not after the client's delayed ACK;
``primacy consume`` does not wait a round trip per message; it counts what it acknowledged.

The broker's accepted sockets had Nagle's algorithm on (``socket.create_server`` leaves
``proto`` 0, and asyncio disables Nagle only for IPPROTO_TCP sockets): a RECEIPT written
right after the MESSAGE that the ACK let through waited for the client's delayed ACK, 40 ms.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Iterator

import psutil
import pytest

from primacy.broker.service import tcp_listener
from primacy.cli.exits import EXIT_OK
from primacy.client.consumer import Consumer
from tests.broker.nodes import Masters, stored_state
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


def _nagle_off(local_port: int, remote_port: int) -> bool:
    """Whether this process's TCP socket from ``local_port`` to ``remote_port`` has Nagle off,
    read from the socket itself (a duplicate of its descriptor: same socket, same options)."""
    [fd] = [
        c.fd
        for c in psutil.Process().net_connections(kind="tcp")
        if c.laddr and c.raddr and (c.laddr.port, c.raddr.port) == (local_port, remote_port)
    ]
    with socket.socket(fileno=os.dup(fd)) as duplicate:
        return bool(duplicate.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


def test_both_ends_of_a_consumers_connection_have_nagle_off(masters: Masters) -> None:
    """The broker's end of a real connection, and the client's: with Nagle on at the broker, a
    RECEIPT written right after the MESSAGE an ACK let through waited for the client's
    delayed ACK (40-48 ms each, issue 45 item 4). What Nagle costs is bench/'s question."""
    master = masters.start()
    broker_port = master.address[1]
    consumer = Consumer(f"tcp://127.0.0.1:{broker_port}", "/queue/rtt", prefetch=1)
    try:
        assert consumer.receive(timeout_s=0.1) is None  # connected and subscribed
        [client_port] = [
            c.laddr.port
            for c in psutil.Process().net_connections(kind="tcp")
            if c.raddr and c.raddr.port == broker_port and c.status == psutil.CONN_ESTABLISHED
        ]
        assert _nagle_off(broker_port, client_port), "the broker's accepted socket has Nagle on"
        assert _nagle_off(client_port, broker_port), "the client's socket has Nagle on"
    finally:
        consumer.close()


_SUMMARY = re.compile(
    r"consumed (\d+) \((\d+) distinct, (\d+) duplicate, (\d+) redelivered, "
    r"(\d+) without receipt\), failovers (\d+), ([\d.]+) s"
)


def _summary(stderr: str) -> tuple[int, ...]:
    found = _SUMMARY.search(stderr)
    assert found, stderr
    *counts, elapsed = found.groups()
    return (*map(int, counts), round(float(elapsed) * 1000))


class _AckCounter:
    """A proxy that passes everything through and counts the client's ACK frames, and those
    of them that ask for a receipt (whose answer the client then waits for)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.acks = self.receipted_acks = 0
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self.target_port))
            self._spawn(self._pass, client, broker, True)
            self._spawn(self._pass, broker, client, False)

    def _pass(self, source: socket.socket, sink: socket.socket, count: bool) -> None:
        pending = b""
        while data := _recv(source):
            if count:
                *frames, pending = (pending + data).split(b"\x00")
                for frame in frames:
                    command, _, rest = frame.lstrip(b"\r\n").partition(b"\n")
                    if command == b"ACK":
                        self.acks += 1
                        head = rest.partition(b"\n\n")[0]
                        self.receipted_acks += any(
                            line.startswith(b"receipt:") for line in head.split(b"\n")
                        )
            try:
                sink.sendall(data)
            except OSError:
                return
        for sock in (source, sink):
            sock.close()

    def close(self) -> None:
        self.listener.close()


@pytest.mark.slow
def test_primacy_consume_does_not_wait_a_round_trip_per_message(group: Group) -> None:
    """A real node and the real command line through a counting proxy. Before the fixes
    `primacy consume` took 40 ms a message (80 s for 2000): each ACK asked for a receipt and
    waited for it, and the broker's Nagle held that receipt back. Now one ACK in
    ``receipt_every`` asks (a RECEIPT confirms every frame before it), the rest go without
    waiting. Its pace against stomp.py's consumer is a benchmark's figure, not this test's
    (a 2x bound on medians of a shared machine's turns was noise-bound)."""
    port = free_port()
    node = group.start("n1", "--stomp", f"127.0.0.1:{port}")
    wait_until(node.is_master, 30, "n1 to serve")
    count = 320
    sent = primacy("send", f"tcp://127.0.0.1:{port}", "/queue/pace", "--count", str(count))
    assert sent.returncode == EXIT_OK, sent.stderr
    proxy = _AckCounter(port)
    try:
        url = f"tcp://127.0.0.1:{proxy.port}"
        consumed = primacy("consume", url, "/queue/pace", "--count", str(count), "--quiet")
    finally:
        proxy.close()
    assert consumed.returncode == EXIT_OK, consumed.stderr
    assert _summary(consumed.stderr)[:2] == (count, count)
    assert proxy.acks == count
    # One in ``receipt_every`` (32) asks, and the window's or the flush's last: a consumer
    # that waited a round trip per message asked for every one. One in eight is the line,
    # independent of the setting it checks.
    assert proxy.receipted_acks <= count // 8, (proxy.receipted_acks, proxy.acks)
    assert stored_state(group.share).pending == {}


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
