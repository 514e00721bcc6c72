"""A node whose share hangs (an NFS hard mount during an outage) must look dead, not serve."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.harness.emulated_hosts import EmulatedHosts
from tests.harness.group import wait_until

pytestmark = [pytest.mark.fuse, pytest.mark.slow]


def _drain(sock: socket.socket, seconds: float) -> list[str]:
    received = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            received.append(sock.recv(4096).decode())
        except TimeoutError:
            break
    return received


def _discard_queued(sock: socket.socket) -> None:
    """Drop what the node sent before now: a ping fed just before the hang was noticed is
    still queued on the socket, and says nothing about what the node does after it."""
    sock.setblocking(False)
    try:
        while True:
            sock.recv(4096)
    except BlockingIOError:
        pass
    finally:
        sock.setblocking(True)


def test_master_on_a_hung_share_stops_claiming_turns_dead_and_starves_the_watchdog(
    emulated_hosts: EmulatedHosts, tmp_path: Path
) -> None:
    (host,) = emulated_hosts(1, lease_s=60.0)
    address = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(address))
        node = emulated_hosts.start_node(
            host, "n1", env={"NOTIFY_SOCKET": str(address), "WATCHDOG_USEC": "400000"}
        )
        wait_until(node.is_master, 30, "the node to serve")
        assert node.status("/liveness") == 200
        assert _drain(sock, 1.0).count("WATCHDOG=1") >= 2  # fed while the share answers
        host.partition("hang")
        wait_until(lambda: node.status("/master") == 503, 10, "the master to stop claiming")
        wait_until(lambda: node.status("/liveness") == 503, 10, "liveness to fail")
        assert node.status("/health") == 200  # the process itself still answers
        _discard_queued(sock)
        assert "WATCHDOG=1" not in _drain(sock, 1.5)  # systemd would now kill it
        host.heal()
        wait_until(lambda: node.status("/liveness") == 200, 30, "liveness after heal")
        assert "WATCHDOG=1" in _drain(sock, 2.0)


def test_slave_on_a_hung_share_is_not_a_healthy_slave(emulated_hosts: EmulatedHosts) -> None:
    host_a, host_b = emulated_hosts(2, lease_s=60.0)
    master = emulated_hosts.start_node(host_a, "a")
    wait_until(master.is_master, 30, "a to serve")
    slave = emulated_hosts.start_node(host_b, "b")
    wait_until(lambda: slave.status("/slave") == 200, 30, "b to be a slave")
    host_b.partition("hang")
    wait_until(lambda: slave.status("/slave") == 503, 10, "b to stop answering as a slave")
    assert slave.status("/liveness") == 503
    assert master.is_master()  # the hang on b's mount does not touch a


def test_slave_that_cannot_reach_the_share_is_not_a_healthy_slave(
    emulated_hosts: EmulatedHosts,
) -> None:
    # A soft mount fails at once (EIO) rather than hanging: the loop stays live, so it is
    # the failed lock attempt itself that must take the slave out of the standby pool.
    host_a, host_b = emulated_hosts(2, lease_s=60.0)
    master = emulated_hosts.start_node(host_a, "a")
    wait_until(master.is_master, 30, "a to serve")
    slave = emulated_hosts.start_node(host_b, "b")
    wait_until(lambda: slave.status("/slave") == 200, 30, "b to be a slave")
    assert httpx.get(f"http://127.0.0.1:{slave.port}/status").json()["lock_attempt_error"] is None
    host_b.partition("eio")
    try:
        wait_until(lambda: slave.status("/slave") == 503, 10, "b to stop answering as a slave")
        status = httpx.get(f"http://127.0.0.1:{slave.port}/status").json()
        assert status["role"] == "slave" and "Input/output error" in status["lock_attempt_error"]
        assert slave.status("/standby") == 503 and slave.status("/liveness") == 200
        assert master.is_master()  # the master, on its own host, is untouched
    finally:
        host_b.heal()
    wait_until(lambda: slave.status("/slave") == 200, 10, "b to be a healthy slave again")
    assert httpx.get(f"http://127.0.0.1:{slave.port}/status").json()["lock_attempt_error"] is None
