"""A client cannot grow the master's memory without bound (issue 42, findings 3 and 4), seen on a
real ``primacy run`` node with a raw socket (stomp.py cannot leave its socket unread) and stomp.py.

Finding 3: a client that never reads its socket while sending frames that ask for replies
(BEGIN/ABORT pairs with long receipt ids) made the master buffer every reply. Finding 4:
subscriptions were counted, not sized: 20 idle connections subscribed 1000 times each to
distinct ~60 KB names. The master's RSS is measured by pid; each attack sends far more than
the bound, so the old code fails it by a wide margin.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import psutil
import pytest

from primacy.broker import codes
from primacy.broker.frames import Frame, FrameParser, encode
from primacy.cli.localgroup import free_port
from tests.broker.nodes import eventually
from tests.broker.stomppy import StompPy
from tests.harness.group import Group, NodeProcess

pytestmark = pytest.mark.slow  # real nodes

MiB = 1024 * 1024
# What the attacks may add to the master's RSS: far below what they send (192 MiB, 180 MiB).
RSS_GROWTH_BOUND = 48 * MiB


@dataclass(frozen=True)
class Node:
    process: NodeProcess
    address: tuple[str, int]

    def rss(self) -> int:
        return int(psutil.Process(self.process.pid).memory_info().rss)

    def connections_open(self) -> int:
        status = httpx.get(f"http://127.0.0.1:{self.process.port}/status", timeout=5).json()
        return int(status["broker"]["connections_open"])


def _start(tmp_path_factory: pytest.TempPathFactory, *flags: str) -> Iterator[Node]:
    group = Group(share=tmp_path_factory.mktemp("share"), log_dir=tmp_path_factory.mktemp("logs"))
    port = free_port()
    try:
        process = group.start("n1", "--stomp", f"127.0.0.1:{port}", *flags)
        group.wait_for_master()
        yield Node(process, ("127.0.0.1", port))
    finally:
        group.close()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A node with the default limits."""
    yield from _start(tmp_path_factory)


class Raw:
    """A plain socket client that reads only when told to."""

    def __init__(self, address: tuple[str, int], receive_buffer: int | None = None) -> None:
        self.sock = socket.socket()
        if receive_buffer is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(10)
        self.sock.connect(address)
        self.parser = FrameParser()

    def send(self, command: str, headers: dict[str, str], body: bytes = b"") -> None:
        self.sock.sendall(encode(Frame.make(command, headers, body)))

    def connect(self) -> None:
        self.send("CONNECT", {"accept-version": "1.2", "host": "x"})

    def frames_until(self, command: str) -> list[Frame]:
        """Frames up to the first ``command``, or until the broker closes the connection."""
        frames: list[Frame] = []
        while not any(frame.command == command for frame in frames):
            try:
                data = self.sock.recv(1 << 16)
            except ConnectionResetError:
                break
            if not data:
                break
            frames += self.parser.feed(data)
        return frames

    def close(self) -> None:
        self.sock.close()


def _error(frames: list[Frame]) -> Frame:
    errors = [frame for frame in frames if frame.command == "ERROR"]
    assert errors, f"no ERROR among {[frame.command for frame in frames]}"
    return errors[-1]


def _normal_traffic_is_served(node: Node, destination: str) -> None:
    """A stock stomp.py client's usual frames, receipted: nothing refused."""
    client = StompPy(node.address)
    client.subscribe(destination, "s", ack="client-individual")
    assert client.send(destination, "hello", **{"message-id": f"{destination}-1"})
    message = client.message()
    assert message.body == "hello"
    assert client.frame_with_receipt("ack", message.headers["ack"])
    client.connection.begin("tx-1")
    client.connection.send(destination, "in a transaction", transaction="tx-1")
    assert client.frame_with_receipt("commit", "tx-1")
    assert client.message().body == "in a transaction"
    assert not client.listener.errors
    client.close()


# ---- finding 3: replies to a client that reads nothing ---------------------------------


def test_a_client_that_never_reads_cannot_grow_the_master(node: Node) -> None:
    # BEGIN/ABORT pairs with receipt ids as long as allowed: two RECEIPTs of 8 KB for each
    # 16 KB sent. The old master read on and buffered every RECEIPT (192 MiB sent, as much
    # held); now it stops reading once the socket's buffer passes write_buffer_high_bytes.
    before = node.rss()
    flooder = Raw(node.address, receive_buffer=4096)
    flooder.connect()
    receipt = "r" * 8000
    pair = b"".join(
        encode(Frame.make(command, {"transaction": "t", "receipt": receipt}))
        for command in ("BEGIN", "ABORT")
    )
    chunk = pair * 64  # 1 MiB
    sent = 0
    flooder.sock.settimeout(3.0)  # a broker that stopped reading takes nothing for this long
    try:
        while sent < 192 * MiB:
            flooder.sock.sendall(chunk)
            sent += len(chunk)
    except TimeoutError:
        pass
    _normal_traffic_is_served(node, "/queue/after-flood")
    grown = node.rss() - before
    assert grown < RSS_GROWTH_BOUND, f"the master grew {grown // MiB} MiB ({sent // MiB} MiB sent)"
    flooder.close()


# ---- finding 4: subscription state ----------------------------------------------------


def test_subscriptions_to_long_names_cannot_grow_the_master(node: Node) -> None:
    # The attack, scaled: 20 idle connections, 150 SUBSCRIBEs each to distinct 60 KB
    # names (180 MB); the old master kept every one.
    before = node.rss()
    clients = [Raw(node.address) for _ in range(20)]
    answers = []
    for number, client in enumerate(clients):
        client.connect()
        try:
            for index in range(150):
                name = f"/queue/{number}.{index}." + "n" * 60_000
                client.send("SUBSCRIBE", {"id": f"s{index}", "destination": name})
            client.send("SUBSCRIBE", {"id": "last", "destination": "/queue/x", "receipt": "r"})
        except OSError:
            pass  # the broker refused and closed: its ERROR is read below
        answers.append(client.frames_until("RECEIPT"))
    grown = node.rss() - before
    assert grown < RSS_GROWTH_BOUND, f"the master grew {grown // MiB} MiB"
    for frames in answers:
        error = _error(frames)
        assert error.get("message") == codes.title(codes.DESTINATION_NAME_TOO_LONG)
    _normal_traffic_is_served(node, "/queue/after-subscriptions")
    for client in clients:
        client.close()


# ---- the new refusals: each with its own code, nothing else refused ----------------------


def test_an_over_long_receipt_id_or_header_value_gets_its_error_and_is_not_echoed(
    node: Node,
) -> None:
    client = Raw(node.address)
    client.connect()
    client.send("BEGIN", {"transaction": "t", "receipt": "r" * 60_000})
    error = _error(client.frames_until("ERROR"))
    assert error.get("message") == codes.title(codes.HEADER_VALUE_TOO_LONG)
    assert "'receipt' header is 60000 bytes" in error.body.decode()
    assert "receipt-id" not in error.header_dict()  # 60 KB is not sent back
    client.close()

    producer = StompPy(node.address)
    sent = producer.send("/queue/long-header", "x", note="n" * 9000, **{"message-id": "long"})
    assert not sent
    error = producer.listener.errors[0]
    assert error.headers["message"] == codes.title(codes.HEADER_VALUE_TOO_LONG)
    assert "'note' header is 9000 bytes long; at most 8192 (max_header_value_bytes)" in error.body
    assert error.headers["receipt-id"].startswith("r")  # a short receipt id is echoed
    producer.close()
    # At the limit, nothing is refused; nothing of the refused SEND was stored.
    consumer = StompPy(node.address)
    consumer.subscribe("/queue/long-header", "s")
    assert consumer.send("/queue/long-header", "y", note="n" * 8192)
    assert consumer.message().body == "y"
    assert consumer.no_message()
    consumer.close()


def test_an_over_long_destination_name_gets_its_error(node: Node) -> None:
    for command in ("SEND", "SUBSCRIBE"):
        client = StompPy(node.address)
        name = "/queue/" + "d" * 1100
        if command == "SEND":
            assert not client.send(name, "x")
        else:
            client.connection.subscribe(name, "s", headers={"receipt": "r-sub"})
            assert not client.listener.wait_receipt("r-sub")
        error = client.listener.errors[0]
        assert error.headers["message"] == codes.title(codes.DESTINATION_NAME_TOO_LONG)
        assert "is 1107 bytes long; at most 1024 (max_destination_name_bytes)" in error.body
        client.close()
    longest = "/queue/" + "d" * (1024 - len("/queue/"))
    _normal_traffic_is_served(node, longest)


# ---- the state budgets, on a node of small ones -----------------------------------------

PER_CONNECTION = 256 * 1024
PER_NETWORK = 1024 * 1024


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    yield from _start(
        tmp_path_factory,
        "--max-state-bytes-per-connection", str(PER_CONNECTION),
        "--max-state-bytes-per-network", str(PER_NETWORK),
        "--max-state-bytes", str(4 * PER_NETWORK),
    )  # fmt: skip


def _subscribe(client: StompPy, prefix: str, count: int) -> int:
    """Up to ``count`` SUBSCRIBEs to distinct names of 1000 bytes, each receipted; how many got
    in before one was refused."""
    for number in range(count):
        name = f"/queue/{prefix}.{number}.".ljust(1000, "n")
        receipt = f"{prefix}-{number}"
        client.connection.subscribe(name, f"s{number}", headers={"receipt": receipt})
        if not client.listener.wait_receipt(receipt):
            return number
    return count


def test_a_connections_subscriptions_past_its_byte_budget_are_refused(small: Node) -> None:
    client = StompPy(small.address)
    taken = _subscribe(client, "one", 2000)
    # Each costs its names and 1.5 KiB of bookkeeping: 2.5 KiB of a 256 KiB budget.
    assert 90 <= taken <= 110
    error = client.listener.errors[0]
    assert error.headers["message"] == codes.title(codes.CONNECTION_STATE_LIMIT)
    assert f"at most {PER_CONNECTION} (max_state_bytes_per_connection)" in error.body
    client.close()
    _normal_traffic_is_served(small, "/queue/after-one")  # its budget went with it


def test_a_networks_subscriptions_and_transactions_past_its_byte_budget_are_refused(
    small: Node,
) -> None:
    # Each connection stays under its own budget (60 KB in a transaction, 60 subscriptions:
    # about 210 KB); together they pass their network's (the loopback's /24).
    clients = []
    refused = None
    for number in range(10):
        client = StompPy(small.address)
        clients.append(client)
        client.connection.begin(f"tx-{number}")
        client.connection.send("/queue/tx", b"b" * 60_000, transaction=f"tx-{number}")
        _subscribe(client, f"net{number}", 60)
        if client.listener.errors:
            refused = client.listener.errors[0]
            break
    assert refused is not None, "10 connections of 210 KB each fit a 1 MiB budget"
    assert refused.headers["message"] == codes.title(codes.NETWORK_STATE_LIMIT)
    assert f"more than {PER_NETWORK} bytes (max_state_bytes_per_network)" in refused.body
    assert len(clients) == 5  # four held about 840 KB; the fifth passed 1 MiB
    for client in clients:
        client.close()
    eventually(lambda: small.connections_open() == 0, "the connections to close")
    # Everything those connections held is free again.
    _normal_traffic_is_served(small, "/queue/after-network")
    again = StompPy(small.address)
    assert _subscribe(again, "again", 60) == 60
    again.close()
