"""On a loaded host, at the default keepalive, the exec guardian keeps a child alive whose
claim its node confirms in time.

Issue 27: the guardian takes a third of a second or more to start on a busy
machine, longer than the 250 ms keepalive; at load 6-7, 3 of 4 starts ended in
"PRIMACY-1106 the claim lapsed unconfirmed" while the node's lease checks kept
passing. The ActiveMQ test's 500 ms keepalive hid it. Here the node runs at the
default keepalive beside busy loops that keep both cores taken, and its child is
started three times (once, then twice more after it is killed), each start a
guardian starting under load.

Load that competes with the node on equal terms may also delay the node's own
lease checks past the guardian's deadline; then killing the child is right (nothing
vouched for the claim), and the node says so (``PRIMACY-1113``). So every kill the
test sees must be one of those, and a kill of a claim confirmed in time fails it.
That catches the start races only when the load happens to hit them (one run in
three or four); tests/supervisor/test_guardian_start.py pins them down without
load, every run.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

from primacy.supervisor import codes
from tests.harness.group import Group, NodeProcess, wait_until

pytestmark = pytest.mark.slow

HOGS = 4  # busy loops on this 2-core machine: a run queue of 5 or more
HOG_NICENESS = 0  # the node's own: load that competes with it on equal terms
CHILD = ["sleep", "6006"]
KEEP_ALIVE_S = 0.25  # the default: the node checks its lease four times per period
CHECKS_PER_START = 8  # lease checks the child must outlive: 4 keepalive periods
KEPT = 3  # children that live through their checks, each under a new guardian
STARTS = 6  # at most, should the host starve the node (it then says so) now and then


@pytest.fixture
def loaded_host() -> Iterator[None]:
    hogs = [
        subprocess.Popen(["nice", "-n", str(HOG_NICENESS), "sh", "-c", "while :; do :; done"])
        for _ in range(HOGS)
    ]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait(10)


def _children(node: NodeProcess) -> list[psutil.Process]:
    try:
        below = psutil.Process(node.pid).children(recursive=True)
    except psutil.Error:
        return []
    return [p for p in below if _command(p) == CHILD]


def _command(process: psutil.Process) -> list[str]:
    try:
        return list(process.cmdline())
    except psutil.Error:
        return []


def _last_keepalive(node: NodeProcess) -> float:
    status: dict[str, Any] = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=5).json()
    return float(status.get("last_keepalive_unix_s") or 0.0)


def _started_child(node: NodeProcess, previous: set[int]) -> psutil.Process:
    found: list[psutil.Process] = []

    def started() -> bool:
        found[:] = [p for p in _children(node) if p.pid not in previous]
        return bool(found)

    wait_until(started, 30, "the child to start", interval_s=0.1)
    return found[0]


def _lives_through_lease_checks(node: NodeProcess, child: psutil.Process) -> bool:
    """Whether ``child`` is still alive after several of its node's lease checks."""
    checked_until = _last_keepalive(node) + CHECKS_PER_START * KEEP_ALIVE_S / 2
    wait_until(
        lambda: not child.is_running() or _last_keepalive(node) > checked_until,
        30,
        f"{CHECKS_PER_START} lease checks",
        interval_s=KEEP_ALIVE_S,  # asking more often would load the node under test
    )
    try:
        return child.is_running() and child.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _count(node: NodeProcess, code: str) -> int:
    return node.log().count(code)


@pytest.mark.usefixtures("loaded_host")
def test_a_child_whose_claim_is_confirmed_in_time_is_kept_alive(group: Group) -> None:
    """The child lives through its node's lease checks, start after start (each a new
    guardian starting under load). When the host delays the node's own checks past the
    guardian's deadline, killing the child is right, and the node says so
    (``PRIMACY-1113``): every kill must be such a one, never one of a claim confirmed in
    time (the bugs: a guardian judging before it read what was already confirmed, a
    confirmation sent while no guardian could hear it)."""
    node = group.start("n1", exec_command=CHILD)
    wait_until(node.is_master, 60, "the node to serve", interval_s=0.1)
    seen: set[int] = set()
    kept = 0
    for _ in range(STARTS):
        child = _started_child(node, seen)
        seen.add(child.pid)
        if _lives_through_lease_checks(node, child):
            kept += 1
            child.send_signal(signal.SIGKILL)  # the node starts it again: a new guardian
        # The node tells of a late confirmation when it sends it, after the kill it caused.
        wait_until(
            lambda: (
                _count(node, codes.CHILD_CLAIM_LAPSED) <= _count(node, codes.CLAIM_CONFIRMED_LATE)
            ),
            10,
            f"every kill to be one of a claim confirmed late (else the bug):\n{node.log()}",
        )
        if kept == KEPT:
            break
    assert kept >= 1, f"no child lived through {CHECKS_PER_START} lease checks:\n{node.log()}"
