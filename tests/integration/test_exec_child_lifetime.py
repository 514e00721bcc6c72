"""An exec child's lifetime under its supervisor: its whole tree is stopped on demotion and on
stop (SIGKILLed after the grace if it ignores SIGTERM), it does not outlive a SIGKILLed
supervisor, and a child that keeps crashing hands the lock to another node."""

from __future__ import annotations

import os
import re
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from primacy.share.layout import LOCK_FILE_NAME
from tests.harness.group import Group, NodeProcess, wait_until

pytestmark = pytest.mark.slow


def test_sigkill_of_the_supervisor_takes_its_child_with_it(group: Group) -> None:
    node = group.start("n1", exec_command=["sleep", "777"])
    wait_until(node.is_master, 30, "the node to serve")
    supervisor = psutil.Process(node.pid)
    children: list[psutil.Process] = []

    def child_started() -> bool:
        children[:] = [c for c in supervisor.children() if "777" in " ".join(c.cmdline())]
        return bool(children)

    wait_until(child_started, 10, "the exec child to start")
    node.signal(signal.SIGKILL)
    node.process.wait(10)
    _, alive = psutil.wait_procs(children, timeout=5)
    try:
        assert not alive, f"the child outlived its supervisor: {alive}"
    finally:
        for orphan in alive:
            orphan.kill()


CHILD_SCRIPT = textwrap.dedent("""
    import os, sys, time
    out = sys.argv[1]
    if os.fork() == 0:          # a grandchild that daemonises
        os.setsid()
        if os.fork() == 0:
            with open(out + ".grandchild", "w") as f:
                f.write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    with open(out + ".child", "w") as f:
        f.write(f"{os.getpid()} {os.environ['PRIMACY_EPOCH']} {os.environ['PRIMACY_NODE_ID']}")
    time.sleep(600)
""")


def _read_pids(base: Path) -> tuple[int, int, int]:
    wait_until(
        lambda: (
            Path(f"{base}.child").exists()
            and Path(f"{base}.grandchild").exists()
            and Path(f"{base}.grandchild").read_text() != ""
        ),
        20,
        "the exec child to start",
    )
    pid, epoch, _node = Path(f"{base}.child").read_text().split()
    return int(pid), int(Path(f"{base}.grandchild").read_text()), int(epoch)


def _gone(pid: int) -> bool:
    # A zombie is gone for our purposes. psutil, not a read of /proc/<pid>/stat:
    # the process can be reaped between opening that file and reading it, and
    # the read then raises ProcessLookupError (seen in CI).
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_exec_child_tree_is_stopped_on_demotion_and_on_stop(
    group: Group, share: Path, tmp_path: Path
) -> None:
    base = tmp_path / "pids"
    script = tmp_path / "child.py"
    script.write_text(CHILD_SCRIPT)
    node = group.start(
        "solo",
        "--exec-stop-grace-ms",
        "2000",
        exec_command=[sys.executable, str(script), str(base)],
    )
    child, grandchild, epoch = _read_pids(base)
    assert epoch == 1
    for suffix in (".child", ".grandchild"):
        Path(f"{base}{suffix}").unlink()
    # Demotion: the lock file is replaced under the master.
    (share / "replacement").write_text("")
    os.replace(share / "replacement", share / LOCK_FILE_NAME)
    wait_until(lambda: _gone(child) and _gone(grandchild), 10, "the child tree to be stopped")
    # The node takes the (new) lock again, with a new epoch and a new child.
    child2, grandchild2, epoch2 = _read_pids(base)
    assert epoch2 == 2
    node.signal(signal.SIGTERM)
    assert node.process.wait(15) == 0
    assert _gone(child2) and _gone(grandchild2)


STUBBORN_CHILD_SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    out, role = sys.argv[1], "child"
    def note_sigterm(_signum, _frame):  # and carry on: SIGTERM does not stop us
        with open(f"{out}.{role}.sigterm", "w") as f:
            f.write("SIGTERM")
    signal.signal(signal.SIGTERM, note_sigterm)
    if os.fork() == 0:          # a grandchild with the same handler
        role = "grandchild"
    with open(f"{out}.{role}.tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(f"{out}.{role}.tmp", f"{out}.{role}")
    while True:
        time.sleep(600)
""")
STOP_GRACE_S = 2.0
# From the request to both pids gone, beyond the grace: the role loop hearing the request,
# psutil noticing the SIGKILLed processes, and this test's 20 ms polling, on a loaded machine.
STOP_SLACK_S = 1.0


def _stubborn_tree(base: Path) -> tuple[int, int]:
    wait_until(
        lambda: Path(f"{base}.child").exists() and Path(f"{base}.grandchild").exists(),
        20,
        "the exec child and grandchild to start",
    )
    return int(Path(f"{base}.child").read_text()), int(Path(f"{base}.grandchild").read_text())


@pytest.mark.parametrize("how", ["stop", "switchover", "lease_lost"])
def test_an_exec_child_tree_that_ignores_sigterm_is_killed_after_the_grace(
    group: Group, share: Path, tmp_path: Path, how: str
) -> None:
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN_CHILD_SCRIPT)
    token_file = tmp_path / "admin.token"
    token_file.write_text("s3cret-token-for-tests-only\n")
    token_file.chmod(0o600)

    # The grace is what this test times, not the keepalive: with 250 ms a loaded host confirms
    # the child's claim late now and then and the guardian kills the tree before or during
    # the grace (issue 47 measured 11-14 such kills in 4 minutes at 250 ms, none at 1 000 ms).
    # A lost lease is noticed at the next check, so that case keeps the default.
    keep_alive = () if how == "lease_lost" else ("--lock-keep-alive-period-ms", "1000")

    def start(node_id: str) -> NodeProcess:
        return group.start(
            node_id,
            "--exec-stop-grace-ms",
            str(round(STOP_GRACE_S * 1000)),
            "--admin-token-file",
            str(token_file),
            *keep_alive,
            exec_command=[sys.executable, str(script), str(tmp_path / node_id)],
        )

    try:
        master = start("a")
        child, grandchild = _stubborn_tree(tmp_path / "a")
        assert all(psutil.pid_exists(pid) for pid in (child, grandchild))
        if how == "switchover":
            other = start("b")
            wait_until(
                lambda: (
                    {m["node_id"]: m["role"] for m in _members(master) if m["live"]}
                    == {"a": "master", "b": "slave"}
                ),
                15,
                "both nodes registered",
            )
        # The tree the test watches must be the one the request stops: on a loaded host its
        # guardian may have killed it for a claim confirmed late (PRIMACY-1106/1113), and the
        # node started another, whose end this test would not see (issue 47: a CI run measured
        # that earlier kill as a stop 0.14 s after the switchover).
        assert not _gone(child) and not _gone(grandchild), (
            f"the tree was killed before the request:\n{master.log()}"
        )
        asked_at = time.monotonic()
        if how == "stop":
            master.signal(signal.SIGTERM)
        elif how == "switchover":
            answer = httpx.post(
                f"http://127.0.0.1:{master.port}/switchover",
                headers={"Authorization": "Bearer s3cret-token-for-tests-only"},
                json={"to": "b"},
            )
            assert answer.status_code == 200, answer.text
        else:
            (share / "replacement").write_text("")
            os.replace(share / "replacement", share / LOCK_FILE_NAME)
        wait_until(
            lambda: _gone(child) and _gone(grandchild),
            STOP_GRACE_S + 10,
            "the child tree to be stopped",
        )
        took_s = time.monotonic() - asked_at
        sigtermed = [
            Path(f"{tmp_path / 'a'}.{role}.sigterm").exists() for role in ("child", "grandchild")
        ]
        if how == "lease_lost":
            # A lost lease stops the children at once: SIGKILL, no grace to wait out.
            assert sigtermed == [False, False]
            assert took_s < STOP_GRACE_S, took_s
        else:
            # Both got SIGTERM, ignored it, and were killed when the grace ran out.
            assert sigtermed == [True, True]
            assert STOP_GRACE_S <= took_s <= STOP_GRACE_S + STOP_SLACK_S, took_s
            stopped = re.compile(r"PRIMACY-1102 child tree stopped \(\d+ processes, graceful\)")
            wait_until(lambda: stopped.search(master.log()), 5, "the stop to be logged")
        if how == "stop":
            assert master.process.wait(15) == 0
        elif how == "switchover":
            # The lock goes only after the old tree is gone, so the new master comes after it.
            assert group.wait_for_master(exclude={"a"}) is other
            _stubborn_tree(tmp_path / "b")
    finally:
        _kill_stubborn_trees(tmp_path, script)


def _kill_stubborn_trees(directory: Path, script: Path) -> None:
    """Kill by pid what a killed node leaves behind (a SIGKILLed supervisor cannot stop it)."""
    for pid_file in [*directory.glob("*.child"), *directory.glob("*.grandchild")]:
        try:
            process = psutil.Process(int(pid_file.read_text()))
            if str(script) in process.cmdline():
                process.kill()
        except (psutil.Error, ValueError):
            pass


def _members(node: NodeProcess) -> list[dict[str, Any]]:
    members = httpx.get(f"http://127.0.0.1:{node.port}/cluster").json()["members"]
    assert isinstance(members, list)
    return members


def test_a_crash_looping_child_hands_the_lock_to_another_node(group: Group, tmp_path: Path) -> None:
    config = tmp_path / "node.toml"
    config.write_text(
        "exec_max_restarts = 1\nexec_restart_window_s = 30\ncrash_loop_hold_off_ms = 60000\n"
    )
    crashing = [sys.executable, "-c", "import sys; sys.exit(3)"]
    first = group.start("first", "--config", str(config), exec_command=crashing)
    group.wait_for_master()
    second = group.start(
        "second",
        "--config",
        str(config),
        exec_command=[sys.executable, "-c", "import time; time.sleep(600)"],
    )
    wait_until(second.is_master, 20, "the second node to take over from the crash-looping one")
    assert "keeps exiting" in first.log()
    assert first.status("/slave") == 200
