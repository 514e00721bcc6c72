"""An exec child never outlives its node's claim, whatever happens to its supervisor.

Each test runs real supervisors whose child is a plain process tree: a child
that leaves a daemonised grandchild behind (double fork into a new session),
so the tree is more than one process and not all of it is in one group.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from primacy.cli.localgroup import NodeProcess, free_port
from tests.harness.claims import lapsed_claim_ends, latest_claim_end
from tests.harness.group import Group, wait_until

pytestmark = pytest.mark.slow

KEEP_ALIVE_MS = 1000


def _tree_command(tag: str) -> list[str]:
    """A child ``sleep 77<tag>`` that leaves a daemonised ``sleep 78<tag>`` behind."""
    return ["sh", "-c", f"(setsid sleep 78{tag} &); exec sleep 77{tag}"]


def _exec_tree(node: NodeProcess, tag: str) -> list[psutil.Process]:
    """The node's guardian and everything below it, once the whole tree is up."""
    found: list[psutil.Process] = []

    def complete() -> bool:
        below = psutil.Process(node.pid).children(recursive=True)
        commands = [" ".join(p.cmdline()) for p in below]
        found[:] = below
        return any(f"sleep 77{tag}" in c for c in commands) and any(
            f"sleep 78{tag}" in c for c in commands
        )

    wait_until(complete, 20, f"{node.node_id}'s exec tree to start")
    return list(found)


def _status(node: NodeProcess) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=5).json()
    return answer


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if _runs(p)]


def _runs(process: psutil.Process) -> bool:
    """Running and not a zombie; a process reaped between the two questions is gone."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill(processes: list[psutil.Process]) -> None:
    for process in _alive(processes):
        process.kill()


def _master_and_standby(
    group: Group, tags: tuple[str, str]
) -> tuple[NodeProcess, list[psutil.Process], NodeProcess]:
    """A serving node with its exec tree up, and a second node standing by."""
    keep_alive = ("--lock-keep-alive-period-ms", str(KEEP_ALIVE_MS))
    first = group.start("n1", *keep_alive, exec_command=_tree_command(tags[0]))
    wait_until(first.is_master, 30, "the first node to serve")
    tree = _exec_tree(first, tags[0])
    second = group.start("n2", *keep_alive, exec_command=_tree_command(tags[1]))
    wait_until(lambda: second.status("/slave") == 200, 30, "the second node to stand by")
    return first, tree, second


def test_the_tree_is_gone_before_another_node_serves_after_a_sigkill(group: Group) -> None:
    first, tree, second = _master_and_standby(group, ("1", "2"))
    try:
        first.signal(signal.SIGKILL)
        wait_until(second.is_master, 30, "the second node to take over")
        assert not _alive(tree), f"the old master's tree outlived it: {_alive(tree)}"
    finally:
        _kill(tree)


class MemoryCgroup:
    """A cgroup v1 memory controller group of this test's own, where the kernel's OOM
    killer acts on the processes moved into it and on nothing else."""

    ROOT = Path("/sys/fs/cgroup/memory")

    def __init__(self, name: str) -> None:
        self.path = self.ROOT / name
        self.path.mkdir()

    def move(self, pid: int) -> None:
        """Moves the whole process (every thread); its children stay where they are, and
        its memory charged so far stays charged where it was (no charge moves in v1)."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def limit(self, limit_bytes: int) -> None:
        (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))

    def oom_kills(self) -> int:
        for line in (self.path / "memory.oom_control").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
        raise AssertionError("this kernel's memory.oom_control counts no oom_kill")

    def remove(self) -> None:
        # The group can be removed once the dead processes in it have been reaped.
        wait_until(lambda: not (self.path / "cgroup.procs").read_text().strip(), 10, "reaping")
        self.path.rmdir()


def _memory_cgroup_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the OOM test needs root to make a memory cgroup"
    if not (MemoryCgroup.ROOT / "memory.limit_in_bytes").exists():
        return f"no cgroup v1 memory controller at {MemoryCgroup.ROOT}"
    return None


@pytest.fixture
def memory_cgroup() -> Iterator[MemoryCgroup]:
    reason = _memory_cgroup_unavailable()
    if reason:
        pytest.skip(reason)
    made = MemoryCgroup(f"primacy-test-{os.getpid()}-{time.monotonic_ns()}")
    try:
        yield made
    finally:
        made.remove()


def test_the_tree_is_gone_before_another_node_serves_after_an_oom_kill(
    group: Group, memory_cgroup: MemoryCgroup
) -> None:
    first, tree, second = _master_and_standby(group, ("5", "6"))
    try:
        # The supervisor alone goes into a group with no room to grow; its guardian and
        # child stay outside, as a broker with its own memory settings would.
        memory_cgroup.move(first.pid)
        memory_cgroup.limit(64 * 1024)
        give_up_at = time.monotonic() + 60
        with httpx.Client(timeout=5) as client:  # each answer makes it allocate a little
            while first.alive():
                assert time.monotonic() < give_up_at, "60 s of requests and no OOM kill"
                try:
                    client.get(f"http://127.0.0.1:{first.port}/metrics")
                except httpx.TransportError:
                    break  # killed mid-answer
        assert first.process.wait(30) == -signal.SIGKILL
        assert memory_cgroup.oom_kills() == 1, "the supervisor died, but not by the OOM killer"
        wait_until(second.is_master, 30, "the second node to take over")
        assert not _alive(tree), f"the old master's tree outlived it: {_alive(tree)}"
    finally:
        _kill(tree)


def test_a_stopped_supervisor_s_tree_dies_within_its_claim(group: Group) -> None:
    node = group.start(
        "n1", "--lock-keep-alive-period-ms", str(KEEP_ALIVE_MS), exec_command=_tree_command("3")
    )
    wait_until(node.is_master, 30, "the node to serve")
    tree = _exec_tree(node, "3")
    try:
        # The guardian hears every lease check: the tree lives on through several claims.
        first = _status(node)["last_keepalive_unix_s"]
        wait_until(
            lambda: _status(node)["last_keepalive_unix_s"] > first + 3 * KEEP_ALIVE_MS / 1000,
            30,
            "three keepalive periods of lease checks",
        )
        assert len(_alive(tree)) == len(tree), "the guardian killed a child whose claim holds"
        assert lapsed_claim_ends(node.log()) == []
        node.signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        # (The guardian stays a zombie: its parent is stopped. A zombie runs nothing.) A
        # stopped supervisor neither closes the guardian's pipe nor tells it to stop: only
        # the claim's deadline can end the tree, and the guardian says it did.
        wait_until(lambda: not _alive(tree), 10, "the tree to die")
        wait_until(lambda: lapsed_claim_ends(node.log()), 10, "the guardian's claim-lapse line")
        # The deadline it killed on is the claim of the last lease check before SIGSTOP,
        # which ends before another node's takeover wait does; how late the guardian acts
        # on it is bench/claim_lapse_load.py's figure, not this test's.
        [claim_end] = lapsed_claim_ends(node.log())
        latest = latest_claim_end(stopped_at, KEEP_ALIVE_MS / 1000)
        assert claim_end <= latest, (
            f"the claim ran {claim_end - latest:.3f} s past the last check's"
        )
    finally:
        node.signal(signal.SIGCONT)
        _kill(tree)


def test_a_graceful_stop_gives_the_child_its_whole_grace(group: Group, tmp_path: Path) -> None:
    # The child takes four keepalive periods to shut down: the claim must stay confirmed
    # to its guardian while it does, or the guardian would cut it short.
    done = tmp_path / "shut-down-cleanly"
    script = f"trap 'sleep 2; echo yes > {done}; exit 0' TERM; while :; do sleep 0.1; done"
    node = group.start(
        "n1",
        "--lock-keep-alive-period-ms",
        "500",
        "--exec-stop-grace-ms",
        "10000",
        exec_command=["sh", "-c", script],
    )
    wait_until(node.is_master, 30, "the node to serve")
    wait_until(
        lambda: any(  # its shell has run its trap and started a sleep
            p.cmdline()[:2] == ["sleep", "0.1"]
            for p in psutil.Process(node.pid).children(recursive=True)
        ),
        20,
        "the child to start",
    )
    node.signal(signal.SIGTERM)
    assert node.process.wait(30) == 0
    assert done.read_text() == "yes\n"
    assert "PRIMACY-1106" not in node.log()


_LISTEN_WHEN_TOLD = """
import socket, sys, time, pathlib
trigger, port = pathlib.Path(sys.argv[1]), int(sys.argv[2])
while not trigger.exists():
    time.sleep(0.02)
server = socket.create_server(("127.0.0.1", port))
while True:
    server.accept()[0].close()
"""

_NOTIFY_WHEN_TOLD = """
import os, socket, sys, time, pathlib
trigger = pathlib.Path(sys.argv[1])
while not trigger.exists():
    time.sleep(0.02)
with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
    notify.sendto(b"STATUS=up\\nREADY=1", os.environ["NOTIFY_SOCKET"])
while True:
    time.sleep(1)
"""


@pytest.mark.parametrize("check", ["tcp", "notify", "command"])
def test_master_answers_503_until_the_child_is_ready(
    group: Group, tmp_path: Path, check: str
) -> None:
    trigger = tmp_path / "be-ready"
    port = free_port()
    command = [sys.executable, "-c", _LISTEN_WHEN_TOLD, str(trigger), str(port)]
    if check == "tcp":
        ready: tuple[str, ...] = ("--exec-ready", f"tcp:127.0.0.1:{port}")
    elif check == "notify":
        command = [sys.executable, "-c", _NOTIFY_WHEN_TOLD, str(trigger)]
        ready = ("--exec-ready", "notify")
    else:
        ready = ("--exec-ready-cmd", f"test -e {trigger}")
    node = group.start("n1", *ready, exec_command=command)
    wait_until(lambda: node.status("/health") == 200, 30, "the node to answer")
    wait_until(lambda: _status(node)["role"] == "master", 30, "the node to take the role")
    status = _status(node)
    assert "readiness check" in status["waiting_for"]
    assert node.status("/master") == 503
    assert node.status("/readiness") == 503
    assert status["serving"] is False
    trigger.touch()
    wait_until(node.is_master, 30, "the node to serve once its child is ready")
    assert node.status("/readiness") == 200
    assert _status(node)["waiting_for"] is None
    assert "PRIMACY-1107" in node.log()


def test_a_child_never_ready_is_a_failed_start(group: Group, tmp_path: Path) -> None:
    node = group.start(
        "n1",
        "--exec-ready",
        f"tcp:127.0.0.1:{free_port()}",
        "--exec-ready-timeout-s",
        "1",
        "--exec-max-restarts",
        "0",
        exec_command=_tree_command("4"),
    )
    wait_until(lambda: "PRIMACY-1108" in node.log(), 30, "the readiness timeout")
    wait_until(lambda: node.status("/health") == 200, 30, "the node to answer")
    wait_until(lambda: _status(node)["held_off_s"] > 0, 30, "the node to give the lock up")
    assert node.status("/master") == 503
    wait_until(
        lambda: (
            not any(
                "sleep 774" in " ".join(p.cmdline())
                for p in psutil.Process(node.pid).children(recursive=True)
            )
        ),
        10,
        "the child's tree to be gone",
    )


def test_pre_promote_vetoes_a_takeover_and_sees_the_epoch(group: Group, tmp_path: Path) -> None:
    vetoing = group.start("n1", "--pre-promote", "echo 'storage not fenced' >&2; exit 3")
    wait_until(lambda: "PRIMACY-1109" in vetoing.log(), 30, "the veto")
    assert "storage not fenced" in vetoing.log()
    assert vetoing.status("/master") == 503
    seen = tmp_path / "seen"
    allowing = group.start(
        "n2",
        "--pre-promote",
        f'echo "$PRIMACY_EPOCH $PRIMACY_NODE_ID" > {seen}',
        "--priority",
        "high",
    )
    wait_until(allowing.is_master, 30, "the node whose pre_promote allows it to serve")
    epoch, node_id = seen.read_text().split()
    assert (int(epoch), node_id) == (_status(allowing)["epoch"], "n2")
    assert "PRIMACY-1110" in allowing.log()
