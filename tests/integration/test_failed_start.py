"""A master that cannot start serving steps down once and holds off: no promotion loop."""

from __future__ import annotations

import json
import os
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.harness.group import Group, MasterPoller, NodeProcess, wait_until

pytestmark = pytest.mark.slow


def _status(node: NodeProcess) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/status", timeout=5) as answer:
        return dict(json.load(answer))


def test_a_stomp_port_that_cannot_be_bound_is_a_failed_start_with_hold_off(
    group: Group, share: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = group.start(
            "n1", "--stomp", f"127.0.0.1:{port}", "--crash-loop-hold-off-ms", "60000"
        )
        with MasterPoller([node]) as poller:
            wait_until(lambda: "PRIMACY-1015" in node.log(), 20, "the bind failure")
            wait_until(
                lambda: _status(node)["role"] == "slave" and _status(node)["held_off_s"] > 30,
                10,
                "the node to hold off as a slave",
            )
        assert poller.answers, "the poller never reached the node"
        assert not [a for a in poller.answers if a.status == 200], (
            "200 from a master that cannot serve"
        )
        assert sorted(os.listdir(share / "epochs")) == ["1"]  # one claim, not one a tick
        assert "Address already in use" in node.log()


def test_a_slave_that_held_off_serves_once_the_port_is_free(group: Group, share: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = group.start("n1", "--stomp", f"127.0.0.1:{port}", "--crash-loop-hold-off-ms", "1500")
        wait_until(lambda: "PRIMACY-1015" in node.log(), 20, "the bind failure")
    wait_until(node.is_master, 20, "the node to serve once the hold-off ended and the port is free")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
        assert client.recv(4096).startswith(b"CONNECTED")
