"""sd_notify against a real Unix datagram socket: READY, STATUS, WATCHDOG pings and their pace."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.supervisor.shell import sdnotify
from primacy.supervisor.shell.sdnotify import Notifier


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(2.0)
    yield sock, path
    sock.close()


def received(sock: socket.socket) -> list[str]:
    """Every datagram waiting on the socket, without blocking."""
    messages = []
    sock.setblocking(False)
    try:
        while True:
            messages.append(sock.recv(4096).decode())
    except BlockingIOError:
        pass
    finally:
        sock.settimeout(2.0)
    return messages


def test_ready_status_watchdog_stopping_arrive(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    notifier = Notifier({"NOTIFY_SOCKET": path})
    assert notifier.ready()
    assert notifier.status("role master, epoch 7")
    assert notifier.watchdog()
    assert notifier.stopping()
    notifier.close()
    assert [sock.recv(4096).decode() for _ in range(4)] == [
        "READY=1",
        "STATUS=role master, epoch 7",
        "WATCHDOG=1",
        "STOPPING=1",
    ]


def test_status_is_one_line(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    notifier = Notifier({"NOTIFY_SOCKET": path})
    notifier.status("role slave\nSTATUS=forged")
    notifier.close()
    assert sock.recv(4096).decode() == "STATUS=role slave STATUS=forged"


def test_abstract_socket_name() -> None:
    name = f"primacy-test-{os.getpid()}-{time.monotonic_ns()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2.0)
        notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
        assert notifier.ready()
        notifier.close()
        assert sock.recv(4096) == b"READY=1"


def test_no_op_without_notify_socket() -> None:
    notifier = Notifier({})
    assert not notifier.ready()
    assert not notifier.watchdog_if_due(0.0)


def test_a_vanished_socket_does_not_raise(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    notifier = Notifier({"NOTIFY_SOCKET": path})
    assert notifier.ready()
    sock.close()
    os.unlink(path)
    assert not notifier.ready()
    notifier.close()


@pytest.mark.parametrize(
    ("environ", "expected_s"),
    [
        ({"WATCHDOG_USEC": "30000000"}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval_is_half_the_timeout(
    environ: dict[str, str], expected_s: float | None
) -> None:
    assert sdnotify.watchdog_interval_s(environ) == expected_s


def test_watchdog_pings_at_half_the_interval(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"})
    # a keepalive loop revalidating every 0.25 s for 4.0 s of fake time
    sent = [notifier.watchdog_if_due(tick * 0.25) for tick in range(17)]
    notifier.close()
    pinged_at = [tick * 0.25 for tick, was_sent in enumerate(sent) if was_sent]
    assert pinged_at == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert received(sock) == ["WATCHDOG=1"] * 5


def test_no_pings_once_the_keepalive_loop_is_stuck(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "40000"})  # ping every 20 ms
    mount_hangs = threading.Event()
    release = threading.Event()

    def keepalive_loop() -> None:
        while not release.is_set():
            if mount_hangs.is_set():
                release.wait()  # a revalidation blocked on a hung mount
                return
            notifier.watchdog_if_due(time.monotonic())
            time.sleep(0.005)

    loop = threading.Thread(target=keepalive_loop)
    loop.start()
    try:
        time.sleep(0.2)
        mount_hangs.set()
        time.sleep(0.05)
        before_hang = received(sock)
        time.sleep(0.2)
        during_hang = received(sock)
    finally:
        release.set()
        loop.join()
        notifier.close()
    assert len(before_hang) >= 3
    assert set(before_hang) == {"WATCHDOG=1"}
    assert during_hang == []


def test_the_node_asks_for_its_own_watchdog_when_the_unit_set_none(
    listener: tuple[socket.socket, str],
) -> None:
    sock, path = listener
    notifier = Notifier({"NOTIFY_SOCKET": path}, watchdog_s=2.0)
    assert not notifier.watchdog_if_due(0.0)  # no watchdog is armed before READY
    assert notifier.ready()
    sent = [notifier.watchdog_if_due(tick * 0.25) for tick in range(1, 9)]
    notifier.close()
    assert [tick * 0.25 for tick, was in enumerate(sent, start=1) if was] == [0.25, 1.25]
    assert received(sock) == ["READY=1\nWATCHDOG_USEC=2000000", "WATCHDOG=1", "WATCHDOG=1"]


def test_the_unit_s_watchdogsec_wins(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "4000000"}, watchdog_s=2.0)
    assert notifier.ready()
    sent = [notifier.watchdog_if_due(tick * 0.5) for tick in range(9)]
    notifier.close()
    assert [tick * 0.5 for tick, was in enumerate(sent) if was] == [0.0, 2.0, 4.0]
    assert received(sock) == ["READY=1"] + ["WATCHDOG=1"] * 3


def test_stopping_extends_the_stop_timeout(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    notifier = Notifier({"NOTIFY_SOCKET": path}, stop_s=25.5)
    assert notifier.stopping()
    notifier.close()
    assert received(sock) == ["STOPPING=1\nEXTEND_TIMEOUT_USEC=25500000"]
