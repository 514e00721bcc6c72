"""A killed process blocked in a call into a hung share runs no code of its own again.

``tests/harness/processes.may_run_its_own_code`` is how the ActiveMQ test tells a
broker that may still serve from one that was killed but is held in the kernel by
the emulated share (a real NFS call gives way to SIGKILL; a FUSE request that the
daemon has read does not). It must not call a live process dead, so it is checked
here against processes in each state.
"""

from __future__ import annotations

import signal
import subprocess

import psutil
import pytest

from tests.harness.emulated_hosts import EmulatedHosts
from tests.harness.group import wait_until
from tests.harness.processes import command_line, may_run_its_own_code

pytestmark = pytest.mark.fuse


def _waits_on_fuse(pid: int) -> bool:
    """Whether ``pid`` sleeps in the kernel waiting for a FUSE daemon's answer."""
    with open(f"/proc/{pid}/wchan") as wchan:
        return wchan.read() == "request_wait_answer"  # fs/fuse/dev.c


def test_a_process_killed_in_a_hung_share_call_can_run_nothing(
    emulated_hosts: EmulatedHosts,
) -> None:
    (host,) = emulated_hosts(1, lease_s=60.0)
    host.partition("hang")
    reader = subprocess.Popen(["cat", str(host.share / "never-answered")])
    try:
        process = psutil.Process(reader.pid)
        wait_until(lambda: _waits_on_fuse(reader.pid), 10, "cat to block in the share")
        # The kernel waits on for a killed task only once the daemon has read its request; one
        # still queued is dropped and the task exits (a loaded CI machine killed cat before the
        # daemon read it, the likely cause of a fresh clone seeing cat never go back to that wait).
        wait_until(lambda: host.status()["held"] >= 1, 10, "the daemon to hold the request")
        assert may_run_its_own_code(reader.pid), "blocked, not killed: it runs on if answered"
        reader.send_signal(signal.SIGKILL)
        wait_until(lambda: not may_run_its_own_code(reader.pid), 10, "the kill to land")
        # The daemon holds the request, so the kernel waits for its answer, killed or not.
        # Both waited for together: a fresh clone once saw the task in D and, a moment later,
        # a wchan other than the FUSE wait (a task woken on its wait queue runs for a moment
        # before it sleeps again; which wake-up it was is not known).
        wait_until(
            lambda: process.status() == psutil.STATUS_DISK_SLEEP and _waits_on_fuse(reader.pid),
            10,
            "the last wait, on the FUSE daemon's answer",
        )
        assert not may_run_its_own_code(reader.pid)
        assert "never-answered" in command_line(reader.pid)
    finally:
        host.heal()
        reader.kill()
        reader.wait(10)


def test_running_and_stopped_processes_may_run_and_the_dead_may_not() -> None:
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        assert may_run_its_own_code(sleeper.pid)
        sleeper.send_signal(signal.SIGSTOP)  # stopped, but SIGCONT resumes it
        wait_until(
            lambda: psutil.Process(sleeper.pid).status() == psutil.STATUS_STOPPED, 10, "a stop"
        )
        assert may_run_its_own_code(sleeper.pid)
        sleeper.kill()
        wait_until(
            lambda: psutil.Process(sleeper.pid).status() == psutil.STATUS_ZOMBIE, 10, "a zombie"
        )
        assert not may_run_its_own_code(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait(10)
    assert not may_run_its_own_code(sleeper.pid)  # reaped: no such process
