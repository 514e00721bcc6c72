"""Requests from an untrusted network cannot force a failover (issue 14's HTTP attacks)."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest

from tests.harness.group import Group, NodeProcess, wait_until

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
