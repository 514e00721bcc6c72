"""The HTTP endpoint judges a request by its headers before it reads the body, and reads little."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from primacy.api import guard, http_protocol
from primacy.api.app import create_app
from primacy.api.server import ApiServer
from primacy.api.snapshot import StatusSnapshot
from primacy.broker.admission import Budget
from tests.harness.group import free_port

TOKEN = "0123456789abcdef-token"
CONNECTIONS, PER_NETWORK = 64, 16  # the node's defaults


class Recorder:
    """An ``AdminActions`` that records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def switchover(self, to: str | None) -> dict[str, Any]:
        self.calls.append(("switchover", to))
        return {"to": to}

    def pause(self) -> None:
        self.calls.append(("pause", None))

    def resume(self) -> None:
        self.calls.append(("resume", None))

    def set_priority(self, priority: str) -> None:
        self.calls.append(("priority", priority))


@pytest.fixture
def served() -> Iterator[tuple[int, Recorder]]:
    recorder = Recorder()
    snapshot = StatusSnapshot(
        node="n1", role="master", epoch=3, since_unix_s=0.0, priority="normal"
    )
    port = free_port()
    app = create_app(lambda: snapshot, None, recorder, TOKEN)
    server = ApiServer(app, "127.0.0.1", port, Budget(CONNECTIONS, PER_NETWORK))
    server.start()
    try:
        yield port, recorder
    finally:
        server.stop()


def _raw(
    port: int, head: str, body: bytes = b"", read_timeout_s: float = 10.0
) -> tuple[int, float]:
    """Send a request head (and maybe part of a body); the answer's status and its delay."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout_s) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        answer = sock.recv(4096)
    return int(answer.split(b" ", 2)[1]), time.monotonic() - started


def test_an_unauthorized_admin_request_is_refused_before_its_body_is_read(
    served: tuple[int, Recorder],
) -> None:
    port, recorder = served
    # 200 MB announced, none sent: the answer comes without waiting for (or reading) any of it.
    head = "POST /switchover HTTP/1.1\r\nHost: x\r\nContent-Length: 200000000\r\n"
    assert _raw(port, head)[0] == 401
    assert _raw(port, head + "Authorization: Bearer wrong-token-0123456\r\n")[0] == 403
    assert recorder.calls == []


def test_an_oversized_body_is_refused_even_with_the_token(served: tuple[int, Recorder]) -> None:
    port, recorder = served
    head = (
        f"POST /switchover HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Length: 200000000\r\n"
    )
    assert _raw(port, head)[0] == 413
    chunked = httpx.post(
        f"http://127.0.0.1:{port}/switchover",
        content=iter([b'{"to": "', b"x" * (guard.MAX_BODY_BYTES + 1), b'"}']),
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert chunked.status_code == 413
    assert recorder.calls == []


def test_a_body_that_trickles_in_is_cut_off(
    served: tuple[int, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, recorder = served
    monkeypatch.setattr(guard, "BODY_TIMEOUT_S", 0.3)
    head = (
        f"POST /switchover HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Length: 40\r\nContent-Type: application/json\r\n"
    )
    status, _ = _raw(port, head, b'{"to":')  # and then nothing more
    assert status == 408
    assert recorder.calls == []


def test_a_small_authorized_request_still_works(served: tuple[int, Recorder]) -> None:
    port, recorder = served
    answer = httpx.post(
        f"http://127.0.0.1:{port}/switchover",
        json={"to": "n2"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert answer.status_code == 200 and answer.json()["to"] == "n2"
    assert recorder.calls == [("switchover", "n2")]


def test_the_public_schema_does_not_list_the_admin_routes(served: tuple[int, Recorder]) -> None:
    port, _ = served
    paths = set(httpx.get(f"http://127.0.0.1:{port}/openapi.json").json()["paths"])
    assert "/master" in paths
    assert not paths & guard.ADMIN_PATHS


def _closed_by_server(sock: socket.socket, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_slow_requests_from_many_addresses_cannot_take_the_health_check_away(
    served: tuple[int, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by trying: 70 connections that each sent half a request head held every one of
    uvicorn's 64 slots, and health checks got 503 for as long as they stayed open; a cap per
    address then did not stop a host with four. Now the endpoint's connections are counted per
    network, a newcomer displaces the oldest connection that has not sent its request, and a
    request that does not arrive within REQUEST_TIMEOUT_S ends its connection. The attacker
    fills the endpoint from four networks, one of them the health checker's (127.0.0.0/24)."""
    port, _ = served
    monkeypatch.setattr(http_protocol, "REQUEST_TIMEOUT_S", 1.0)
    slow = []
    for network in range(4):
        for _ in range(PER_NETWORK):
            sock = socket.socket()
            sock.bind((f"127.0.{network}.2", 0))
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"GET /master HTTP/1.1\r\nHost: x\r\n")
            slow.append(sock)
    try:
        for _ in range(3):
            assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        # Every slow connection ends: those displaced at once, the rest at their deadline.
        for sock in slow:
            assert _closed_by_server(sock, http_protocol.REQUEST_TIMEOUT_S * 4)
    finally:
        for sock in slow:
            sock.close()


def test_a_chunked_body_trickling_in_is_cut_off_at_the_request_deadline(
    served: tuple[int, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by trying: the body timeout was per chunk, and a chunked POST trickling a byte
    every 4 s stayed open 22 s. Now the whole request has REQUEST_TIMEOUT_S."""
    port, recorder = served
    monkeypatch.setattr(http_protocol, "REQUEST_TIMEOUT_S", 0.5)
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            f"POST /switchover HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        answer = b""
        while not answer and time.monotonic() - started < 5:
            sock.sendall(b"1\r\n \r\n")  # a byte a tenth of a second, well within any chunk timeout
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable:
                answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert time.monotonic() - started < 2
    assert recorder.calls == []  # the half-sent admin request did nothing
