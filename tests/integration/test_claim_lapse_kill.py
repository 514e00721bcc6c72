"""A claim-lapse kill is not a crash: the node serves again at once, with no crash-loop hold-off.

Issue 47: on a loaded host a node confirmed its exec child's claim a few ms after the
guardian's deadline; the guardian killed the healthy child (exit 125), that exit counted
toward ``exec_max_restarts``, and the node gave the lock up and held off for
``crash_loop_hold_off_ms`` (the 10 s failovers of the ActiveMQ comparison). Here the node is
frozen (SIGSTOP, as a pause on a starved host) until its guardian kills the child, with a
restart budget of 0 and a 60 s hold-off: counted as a crash, that one kill would keep the node
from serving for a minute.
"""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from primacy.supervisor import codes
from tests.harness.group import Group, NodeProcess, wait_until

pytestmark = pytest.mark.slow

CHILD = ["sleep", "4747"]


def _child(node: NodeProcess) -> psutil.Process | None:
    try:
        below = psutil.Process(node.pid).children(recursive=True)
    except psutil.Error:
        return None
    for process in below:
        try:
            if process.cmdline() == CHILD and process.status() != psutil.STATUS_ZOMBIE:
                return process
        except psutil.Error:
            continue
    return None


def _gone(process: psutil.Process) -> bool:
    try:
        return bool(process.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def test_a_claim_lapse_kill_is_followed_by_serving_again_without_a_hold_off(
    group: Group, tmp_path: Path
) -> None:
    config = tmp_path / "node.toml"
    config.write_text("exec_max_restarts = 0\ncrash_loop_hold_off_ms = 60000\n")
    node = group.start("a", "--config", str(config), exec_command=CHILD)
    wait_until(node.is_master, 30, "the node to serve")
    wait_until(lambda: _child(node) is not None, 10, "the child to start")
    first = _child(node)
    assert first is not None
    with node.stopped():  # no lease check, no confirmation: the guardian's deadline passes
        wait_until(lambda: _gone(first), 10, "the guardian to kill the child of a lapsed claim")
    # Back, the node is master again (it kept the lock, or lost and retook it) with a new
    # child, long before a 60 s hold-off would have ended.
    wait_until(lambda: _child(node) not in (None, first), 20, "a new child")
    wait_until(node.is_master, 20, "the node to serve again")
    log = node.log()
    assert f"{codes.CHILD_CLAIM_LAPSED} " in log and "killing the tree" in log, log
    assert "keeps exiting" not in log, log
