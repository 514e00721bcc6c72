"""One host cannot lock others out of a real node's STOMP listener (issue 27, findings 2 and 3).

A real ``primacy run`` with a users file, attacked from other loopback addresses: a host
queueing and hanging up logins, and a host holding idle sockets that never send CONNECT. Its
addresses are in 127.0.3.0/24 and 127.0.4.0/24; the victim's in 127.0.0.0/24 (another network
under the default /24 prefix) and, for idle sockets, in the attacker's own network too.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import pytest

from primacy.broker import codes
from primacy.broker.authentication import MAX_LOGINS_PER_NETWORK
from primacy.broker.frames import Frame, FrameParser, encode
from tests.harness.cli import primacy
from tests.harness.group import Group, NodeProcess, free_port, wait_until

pytestmark = pytest.mark.slow

PASSWORD = "app password"
MAX_CONNECTIONS = 64
WAITING_PER_NETWORK = MAX_CONNECTIONS // 4  # the default: connections without CONNECT


class Node:
    def __init__(self, process: NodeProcess, stomp_port: int) -> None:
        self.process = process
        self.stomp_port = stomp_port


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    root = tmp_path_factory.mktemp("admission")
    users = root / "users.json"
    added = primacy("users", "add", str(users), "app", "--send", "/queue/>", stdin=PASSWORD + "\n")
    assert added.returncode == 0, added.stderr
    (root / "share").mkdir()
    (root / "logs").mkdir()
    group = Group(share=root / "share", log_dir=root / "logs")
    port = free_port()
    try:
        process = group.start(
            "n1", "--stomp", f"127.0.0.1:{port}", "--stomp-users", str(users),
            "--max-connections", str(MAX_CONNECTIONS),
        )  # fmt: skip
        wait_until(process.is_master, 30, "n1 to serve")
        yield Node(process, port)
    finally:
        group.close()


def _connect_from(source: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def _connect_frame(passcode: str) -> bytes:
    headers = {"accept-version": "1.2", "host": "x", "login": "app", "passcode": passcode}
    return encode(Frame.make("CONNECT", headers))


def _first_frame(sock: socket.socket, timeout_s: float = 10.0) -> Frame | None:
    """The first frame the broker sends, or None if it closes without one."""
    parser = FrameParser()
    sock.settimeout(timeout_s)
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return None
        if not data:
            return None
        frames = parser.feed(data)
        if frames:
            return frames[0]


def _log_in(source: str, port: int, passcode: str = PASSWORD) -> Frame | None:
    with _connect_from(source, port) as sock:
        sock.sendall(_connect_frame(passcode))
        return _first_frame(sock)


def _code(frame: Frame | None) -> str:
    assert frame is not None, "the broker closed without a frame"
    return frame.command if frame.command != "ERROR" else frame.get("message", "")[:12]


def test_logins_queued_and_hung_up_by_one_host_neither_refuse_others_nor_look_like_a_bad_password(
    node: Node,
) -> None:
    """Found by trying: 32 CONNECTs hung up at once kept every login slot until their throttled
    turns, and 18 of 19 correct logins from another address got PRIMACY-1525, as a wrong
    password does. Now a hung-up login frees its slot at once, one network holds at most
    MAX_LOGINS_PER_NETWORK, and a login past that is told it is busy (its own code)."""
    port = node.stomp_port
    assert _code(_log_in("127.0.3.2", port, "guess")) == codes.LOGIN_FAILED  # turns now spaced
    for _ in range(32):  # CONNECT and hang up at once: each takes a turn, none waits for it
        with _connect_from("127.0.3.2", port) as sock:
            sock.sendall(_connect_frame("guess"))
    # Another network's correct login gets in at once (its check also outlasts the hang-ups).
    assert _code(_log_in("127.0.0.1", port)) == "CONNECTED"
    # The hung-up logins' slots are free: the host may queue MAX_LOGINS_PER_NETWORK again,
    # and the logins past them are told they are busy, not that the password is wrong.
    held = [_connect_from("127.0.3.2", port) for _ in range(MAX_LOGINS_PER_NETWORK + 4)]
    answers: dict[socket.socket, str] = {}
    try:
        for sock in held:
            sock.sendall(_connect_frame("guess"))

        def read_answers() -> list[str]:
            readable, _, _ = select.select([s for s in held if s not in answers], [], [], 0.05)
            for sock in readable:
                answers[sock] = _code(_first_frame(sock))
            return [code for code in answers.values() if code == codes.LOGINS_BUSY]

        wait_until(lambda: len(read_answers()) >= 4, 10, "the logins past the budget told so")
        assert _code(_log_in("127.0.0.1", port)) == "CONNECTED"  # others still get in
        assert len(read_answers()) == 4
        assert set(answers.values()) <= {codes.LOGINS_BUSY, codes.LOGIN_FAILED}
    finally:
        for sock in held:
            sock.close()


def test_idle_sockets_of_one_host_cannot_refuse_authenticated_connections(node: Node) -> None:
    """Found by trying: 1 000 idle sockets re-opened under the CONNECT timeout made 10 of 11
    authenticated CONNECTs fail with PRIMACY-1520. Now one network's connections without
    CONNECT are limited, the newest displacing its oldest, which is told why."""
    port = node.stomp_port
    idle = [_connect_from(f"127.0.4.{2 + n % 4}", port) for n in range(MAX_CONNECTIONS + 20)]
    try:
        for sock in idle[: len(idle) - WAITING_PER_NETWORK]:  # the network keeps its newest
            assert _code(_first_frame(sock)) == codes.UNAUTHENTICATED_LIMIT
        for _ in range(5):  # other networks' clients, and one of the idle host's own
            assert _code(_log_in("127.0.0.1", port)) == "CONNECTED"
        assert _code(_log_in("127.0.4.9", port)) == "CONNECTED"
    finally:
        for sock in idle:
            sock.close()
