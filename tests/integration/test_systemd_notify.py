"""A real supervisor process talking sd_notify to a real datagram socket, as under systemd."""

from __future__ import annotations

import itertools
import signal
import socket
import struct
import time
from pathlib import Path

import pytest

from tests.harness.group import Group, wait_until

pytestmark = pytest.mark.slow


# Linux (asm-generic/socket.h) names it, Python's socket module does not: the kernel stamps
# each datagram when it is queued, that is when the node sent it, whenever this test reads it.
SO_TIMESTAMPNS = 35


def _collect(sock: socket.socket, seconds: float) -> list[tuple[float, str]]:
    """(send time on CLOCK_REALTIME, message) for what arrives within ``seconds``, then what
    is still queued: a test process that stalls on a loaded machine shifts no timestamp."""
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    received = []
    deadline = time.monotonic() + seconds
    while True:
        sock.settimeout(max(0.0, deadline - time.monotonic()))
        try:
            data, ancillary, _flags, _address = sock.recvmsg(4096, socket.CMSG_SPACE(16))
        except (TimeoutError, BlockingIOError):
            break
        stamps = [
            struct.unpack("qq", payload[:16])
            for level, kind, payload in ancillary
            if (level, kind) == (socket.SOL_SOCKET, SO_TIMESTAMPNS)
        ]
        assert len(stamps) == 1, ancillary
        seconds_part, nanoseconds = stamps[0]
        received.append((seconds_part + nanoseconds / 1e9, data.decode()))
    return received


WATCHDOG_S = 0.4  # WatchdogSec=
KEEPALIVE_S = 0.25  # the node's keepalive period (the default, given explicitly)
SCHEDULING_SLACK_S = 0.05  # a lease check or a loop turn late on a loaded two-core machine


STOP_GRACE_S = 3.0  # the child's exec_stop_grace_ms


@pytest.mark.parametrize("armed_by", ["the unit", "the node"])
def test_ready_status_and_watchdog_pings_reach_systemd(
    group: Group, tmp_path: Path, armed_by: str
) -> None:
    address = tmp_path / "notify.sock"
    env = {"NOTIFY_SOCKET": str(address)}
    # A stop needs the child's grace, then a lock call allowed as long as the node's own
    # watchdog_s allows one (10 s when derived from this short keepalive).
    if armed_by == "the unit":  # WatchdogSec= in the unit: systemd tells the node
        env["WATCHDOG_USEC"] = str(round(WATCHDOG_S * 1e6))
        ready, stop_s = "READY=1", STOP_GRACE_S + 10
    else:  # none in the unit: the node asks for its own
        ready = f"READY=1\nWATCHDOG_USEC={round(WATCHDOG_S * 1e6)}"
        stop_s = STOP_GRACE_S + WATCHDOG_S
    stopping = f"STOPPING=1\nEXTEND_TIMEOUT_USEC={round(stop_s * 1e6)}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(address))
        node = group.start(
            "n1",
            "--lock-keep-alive-period-ms",
            str(round(KEEPALIVE_S * 1000)),
            *(() if armed_by == "the unit" else ("--watchdog-s", str(WATCHDOG_S))),
            "--exec-stop-grace-ms",
            str(round(STOP_GRACE_S * 1000)),
            env=env,
            exec_command=["sleep", "1000"],
        )
        started = time.time()
        messages = _collect(sock, 4.0)
        ended = min(time.time(), started + 4.0)
        messages = [(at, text) for at, text in messages if at <= ended]
        texts = [text for _, text in messages]
        assert ready in texts
        assert any(t.startswith("STATUS=master (epoch 1)") for t in texts), texts
        ready_at = next(at for at, text in messages if text == ready)
        pings = [at for at, text in messages if text == "WATCHDOG=1"]
        # supervisor/shell/sdnotify.py: a ping after a lease check that passed, once half of
        # WatchdogSec has gone by since the last one. A master checks its lease every quarter
        # keepalive, so pings come every WatchdogSec/2 to WatchdogSec/2 + keepalive/4 (the
        # bound below allows keepalive/2), and never more than WatchdogSec apart, from READY
        # on to the end: systemd never kills it.
        gaps = [b - a for a, b in itertools.pairwise([ready_at, *pings, ended])]
        assert max(gaps) < WATCHDOG_S, gaps
        between_pings = [b - a for a, b in itertools.pairwise(pings)]
        # The node decides on its clock just before sending: 10 ms for that send's own delay.
        assert min(between_pings) >= WATCHDOG_S / 2 - 0.01, between_pings
        promised = WATCHDOG_S / 2 + KEEPALIVE_S / 2
        assert max(gaps) <= promised + SCHEDULING_SLACK_S, gaps
        # The count fits that rate over the window after READY.
        window_s = ended - ready_at
        assert window_s / promised - 1 <= len(pings) <= window_s / (WATCHDOG_S / 2) + 1, (
            len(pings),
            window_s,
        )
        node.signal(signal.SIGTERM)
        wait_until(lambda: not node.alive(), 10, "the node to stop")
        tail = [text for _, text in _collect(sock, 0.5)]
        assert stopping in tail
