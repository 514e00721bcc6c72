"""An exec child does not outlive its supervisor: kill -9 of the supervisor kills the child."""

from __future__ import annotations

import signal

import psutil
import pytest

from tests.harness.group import Group, wait_until

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
