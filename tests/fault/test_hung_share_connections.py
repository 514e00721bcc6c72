"""On a share that hangs, demotion still closes every client connection at once.

Nothing the broker or the role loop does may wait on the share: the lease check
that hangs is on the lock I/O worker, the journal write that hangs is on the
writer thread, and an exec child that ignores SIGTERM is stopped on its own
thread. So once the lease check is overdue (one keepalive), the master stops
claiming, and its connections are closed within one more keepalive.
"""

from __future__ import annotations

import signal
import socket
import threading
import time

import psutil
import pytest

from primacy.cli.localgroup import free_port
from tests.harness.emulated_hosts import EmulatedHosts
from tests.harness.group import wait_until

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

KEEP_ALIVE_MS = 1000


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"CONNECT\naccept-version:1.2\nhost:test\n\n\x00")
    assert sock.recv(4096).startswith(b"CONNECTED")
    return sock


def _exec_tree(supervisor_pid: int) -> list[psutil.Process]:
    """The guardian and the exec child below it, once the child's shell loops."""
    found: list[psutil.Process] = []

    def started() -> bool:
        found[:] = psutil.Process(supervisor_pid).children(recursive=True)
        return any(p.cmdline()[:1] == ["sleep"] for p in found)

    wait_until(started, 20, "the exec child to start")
    return list(found)


def _note_death(processes: list[psutil.Process], died: list[float]) -> None:
    """Append when the last of ``processes`` stopped running (polled every 10 ms, 10 s at most)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _running(processes):
            died.append(time.monotonic())
            return
        time.sleep(0.01)


def _running(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _closed_at(sock: socket.socket, give_up_s: float) -> float | None:
    """When the peer closed ``sock`` (monotonic), or None if it stayed open for ``give_up_s``."""
    deadline = time.monotonic() + give_up_s
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if sock.recv(4096) == b"":
                return time.monotonic()
        except TimeoutError:
            return None
        except ConnectionResetError:
            return time.monotonic()
    return None


def test_demotion_on_a_hung_share_closes_every_connection_within_a_keepalive(
    emulated_hosts: EmulatedHosts,
) -> None:
    (host,) = emulated_hosts(1, lease_s=60.0)
    port = free_port()
    node = emulated_hosts.start_node(
        host,
        "n1",
        "--stomp",
        f"127.0.0.1:{port}",
        "--lock-keep-alive-period-ms",
        str(KEEP_ALIVE_MS),
        "--exec-stop-grace-ms",
        "20000",
        "--exec",
        "--",
        "sh",
        "-c",
        "trap '' TERM; while :; do sleep 1; done",
    )
    wait_until(node.is_master, 30, "the node to serve")
    child_tree = _exec_tree(node.pid)
    clients = [_connect(port) for _ in range(3)]
    # One client is mid-send when the share hangs: its write is stuck in the journal.
    clients[0].sendall(b"SEND\ndestination:/queue/q\nreceipt:r1\n\nbody\x00")
    died: list[float] = []
    watcher = threading.Thread(target=_note_death, args=(child_tree, died), daemon=True)
    try:
        host.partition("hang")
        hung_at = time.monotonic()
        watcher.start()
        closed = [_closed_at(sock, give_up_s=10 * KEEP_ALIVE_MS / 1000) for sock in clients]
        assert None not in closed, f"connections left open on a hung share: {closed}"
        # The lease check goes overdue within one keepalive of the hang (it runs every half
        # keepalive and may have just started), and demotion then closes at once.
        latest = max(c for c in closed if c is not None) - hung_at
        assert latest < 2.5 * KEEP_ALIVE_MS / 1000, f"closed {latest:.2f} s after the hang"
        assert node.status("/master") == 503
        assert node.status("/health") == 200  # the loop itself answers, child or no child
        # The child ignores SIGTERM and its grace is 20 s, but its guardian kills its tree
        # when the claim the hung supervisor can no longer confirm runs out: the last lease
        # check started before the hang, so within one keepalive of it, before another
        # node's takeover wait (a tenth longer) could end.
        watcher.join(10)
        assert died, "the exec child's tree outlived the claim"
        assert died[0] - hung_at < 1.1 * KEEP_ALIVE_MS / 1000, f"died {died[0] - hung_at:.2f} s in"
        assert "PRIMACY-1106" in node.log()
    finally:
        for sock in clients:
            sock.close()
        host.heal()


def _receipted_send(sock: socket.socket, body: str, receipt: str) -> None:
    sock.sendall(f"SEND\ndestination:/queue/q\nreceipt:{receipt}\n\n{body}\x00".encode())
    reply = b""
    while b"\x00" not in reply:
        reply += sock.recv(4096)
    assert reply.startswith(b"RECEIPT"), reply


def test_demotion_closes_every_connection_while_a_recovered_body_read_hangs(
    emulated_hosts: EmulatedHosts,
) -> None:
    # A new master reads its recovered messages' bodies from the share when a consumer
    # comes. On a hung share that read hangs; it must hang on the reader thread, not on
    # the event loop, or the demotion that follows could not close a single connection.
    (host,) = emulated_hosts(1, lease_s=60.0)
    port = free_port()
    args = ("--stomp", f"127.0.0.1:{port}", "--lock-keep-alive-period-ms", str(KEEP_ALIVE_MS))
    first = emulated_hosts.start_node(host, "n1", *args)
    wait_until(first.is_master, 30, "the first node to serve")
    producer = _connect(port)
    for number in range(3):
        _receipted_send(producer, f"m{number}", f"r{number}")
    producer.close()
    first.signal(signal.SIGTERM)
    first.process.wait(30)

    second = emulated_hosts.start_node(host, "n2", *args)
    wait_until(second.is_master, 30, "the second node to serve the recovered messages")
    clients = [_connect(port) for _ in range(3)]
    try:
        host.partition("hang")
        hung_at = time.monotonic()
        clients[0].sendall(b"SUBSCRIBE\nid:s\ndestination:/queue/q\n\n\x00")
        closed = [_closed_at(sock, give_up_s=10 * KEEP_ALIVE_MS / 1000) for sock in clients]
        assert None not in closed, f"connections left open on a hung share: {closed}"
        latest = max(c for c in closed if c is not None) - hung_at
        assert latest < 2.5 * KEEP_ALIVE_MS / 1000, f"closed {latest:.2f} s after the hang"
        assert second.status("/master") == 503
        assert second.status("/health") == 200
    finally:
        for sock in clients:
            sock.close()
        host.heal()
