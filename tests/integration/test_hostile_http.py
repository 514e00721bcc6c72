"""Requests from an untrusted network cannot force a failover (issue 14's HTTP attacks)."""

from __future__ import annotations

import json
import select
import socket
import time
import urllib.request
from pathlib import Path

import pytest

from primacy.api.http_protocol import REQUEST_TIMEOUT_S
from tests.harness.group import Group, NodeProcess, wait_until
from tests.harness.operator_http import half_sent_requests

pytestmark = pytest.mark.slow

TOKEN = "an-admin-token-0123456789"
BIG = 200 * 1024 * 1024


def _epoch(node: NodeProcess) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/status", timeout=5) as answer:
        return int(json.load(answer)["epoch"])


def _send_huge_switchover(port: int) -> int:
    """Announce 200 MB of JSON and push as much as the node takes; its status code."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"POST /switchover HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {BIG}\r\n\r\n".encode()
        )
        chunk = b"[" * (1 << 20)
        try:
            for _ in range(BIG // len(chunk)):
                sock.sendall(chunk)
        except OSError:
            pass  # the node answered and closed: it never reads what it refuses
        return int(sock.recv(4096).split(b" ", 2)[1])


def test_a_200_mb_unauthenticated_admin_body_neither_is_read_nor_fails_the_master_over(
    group: Group, tmp_path: Path
) -> None:
    token_file = tmp_path / "admin.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    nodes = group.start_many(2, "--admin-token-file", str(token_file))
    master = group.wait_for_master()
    (slave,) = [node for node in nodes if node is not master]
    wait_until(lambda: slave.status("/slave") == 200, 20, "the other node to be a slave")
    epoch = _epoch(master)
    for _ in range(3):
        assert _send_huge_switchover(master.port) == 401
    assert group.wait_for_master() is master and _epoch(master) == epoch
    assert "PRIMACY-1003" not in master.log()  # it never lost a lease check
    assert slave.status("/slave") == 200 and slave.status("/master") == 503


def test_a_host_with_four_addresses_cannot_fail_the_masters_health_check(group: Group) -> None:
    """Issue 27: 16 half-sent requests from each of 127.0.0.2-.5 (each address under the old
    per-address cap) held all 64 connections, and the serving master answered /master 503 29
    times out of 29; a chunked body trickling a byte every 4 s stayed open 22 s. Now the four
    addresses are one network, a health check (here from 127.0.0.1, that same network)
    displaces the oldest half-sent request, and a whole request has REQUEST_TIMEOUT_S."""
    node = group.start("n1")
    wait_until(node.is_master, 30, "n1 to serve")
    trickle = socket.socket()
    trickle.bind(("127.0.5.2", 0))
    connecting_at = time.monotonic()  # the node's deadline for it starts no earlier
    trickle.connect(("127.0.0.1", node.port))
    trickle.sendall(b"POST /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    trickle_started = time.monotonic()
    slow: list[socket.socket] = []
    try:
        slow += half_sent_requests(node, 64)
        for _ in range(5):
            assert node.status("/master", timeout_s=5) == 200
        answer = b""
        while not answer and time.monotonic() - trickle_started < 3 * REQUEST_TIMEOUT_S:
            trickle.sendall(b"1\r\n \r\n")  # a byte every half second: no chunk is late
            readable, _, _ = select.select([trickle], [], [], 0.5)
            if readable:
                answer = trickle.recv(4096)
        answered_at = time.monotonic()
        # No chunk was ever late, so only a deadline on the whole request can answer 408 (one
        # reset by each chunk, the 22 s trickle of issue 27, never does within the loop's
        # 3 x REQUEST_TIMEOUT_S); the node names that deadline, and it did not come early.
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert f"within {REQUEST_TIMEOUT_S:g} s".encode() in answer, answer
        assert answered_at - connecting_at >= REQUEST_TIMEOUT_S
        # Nor a deadline longer than the one promised: a second REQUEST_TIMEOUT_S is the margin
        # for a loaded host's scheduling (the old + 2 s was not enough on two busy cores); a
        # deadline counted twice always lands past it.
        assert answered_at - trickle_started < 2 * REQUEST_TIMEOUT_S
        for sock in slow:  # every half-sent request ends by its deadline
            sock.settimeout(REQUEST_TIMEOUT_S + 2)
            try:
                assert sock.recv(4096) == b"", "a half-sent request was answered"
            except ConnectionResetError:
                pass  # closed: what is asserted
    finally:
        trickle.close()
        for sock in slow:
            sock.close()
