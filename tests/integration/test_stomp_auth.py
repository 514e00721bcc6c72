"""Authentication on a real node: ``primacy run --stomp-users``, stock stomp.py clients, what
``/status`` and ``/metrics`` say; and a node without a users file says loudly that it is open."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from primacy.broker import codes as broker_codes
from primacy.cli import codes as cli_codes
from tests.broker.nodes import RawClient
from tests.broker.stomppy import StompPy
from tests.harness.cli import primacy
from tests.harness.group import Group, free_port, wait_until
from tests.integration.test_broker_limits import _metric

pytestmark = pytest.mark.slow


def test_a_node_with_a_users_file_lets_in_its_users_only(group: Group, tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    added = primacy(
        "users", "add", str(users), "app", "--send", "/queue/in.>", "--receive", "/queue/in.>",
        stdin="app password\n",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    port = free_port()
    node = group.start("n1", "--stomp", f"127.0.0.1:{port}", "--stomp-users", str(users))
    wait_until(node.is_master, 30, "n1 to serve")
    status = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=5).json()
    assert status["stomp_auth"] == "users-file"
    assert cli_codes.STOMP_OPEN not in node.log()

    client = StompPy(("127.0.0.1", port), login="app", passcode="app password")
    assert client.send("/queue/in.orders", "hello")
    client.close()
    intruder = RawClient(("127.0.0.1", port))
    intruder.send("CONNECT", {"accept-version": "1.2", "host": "x", "login": "app",
                              "passcode": "guess"})  # fmt: skip
    (error,) = [f for f in intruder.read_until_closed() if f.command == "ERROR"]
    assert error.get("message", "").startswith(broker_codes.LOGIN_FAILED)
    wait_until(
        lambda: _metric(node, "primacy_stomp_logins_total", {"outcome": "failed"}) == 1,
        10,
        "the failed login in /metrics",
    )
    assert _metric(node, "primacy_stomp_logins_total", {"outcome": "ok"}) == 1
    assert "guess" not in node.log()


def test_a_node_without_a_users_file_says_it_is_open(group: Group) -> None:
    port = free_port()
    node = group.start("n1", "--stomp", f"127.0.0.1:{port}")
    wait_until(node.is_master, 30, "n1 to serve")
    assert cli_codes.STOMP_OPEN in node.log() and "lets every client in" in node.log()
    status = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=5).json()
    assert status["stomp_auth"] == "none"
