"""A real supervisor process talking sd_notify to a real datagram socket, as under systemd."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pytest

from tests.harness.group import Group, wait_until

pytestmark = pytest.mark.slow


def _collect(sock: socket.socket, seconds: float) -> list[tuple[float, str]]:
    received = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            received.append((time.monotonic(), sock.recv(4096).decode()))
        except TimeoutError:
            break
    return received


def test_ready_status_and_watchdog_pings_reach_systemd(group: Group, tmp_path: Path) -> None:
    address = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(address))
        started = time.monotonic()
        node = group.start("n1", env={"NOTIFY_SOCKET": str(address), "WATCHDOG_USEC": "400000"})
        messages = _collect(sock, 3.0)
        elapsed_s = time.monotonic() - started
        texts = [text for _, text in messages]
        assert "READY=1" in texts
        assert any(t.startswith("STATUS=master (epoch 1)") for t in texts), texts
        pings = texts.count("WATCHDOG=1")
        # WatchdogSec=0.4 s: the node pings at most every 0.2 s, and keeps pinging.
        assert 2 <= pings <= elapsed_s / 0.2 + 1, (pings, elapsed_s)
        node.signal(signal.SIGTERM)
        wait_until(lambda: not node.alive(), 10, "the node to stop")
        tail = [text for _, text in _collect(sock, 0.5)]
        assert "STOPPING=1" in tail
