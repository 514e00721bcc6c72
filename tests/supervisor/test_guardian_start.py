"""A guardian that starts late still reads the confirmations its supervisor already sent."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from primacy.supervisor.child.child_control import ChildControl
from primacy.supervisor.child.children import ChildProcess
from primacy.supervisor.child.guardian import CLAIM_LAPSED
from tests.harness.group import wait_until


def _guardian(
    claim_until: float, already_written: bytes, command: tuple[str, ...] = ("sleep", "600")
) -> tuple[subprocess.Popen[bytes], int]:
    read_end, write_end = os.pipe()
    os.write(write_end, already_written)
    guardian = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "primacy.supervisor.child.guardian",
            "--control-fd",
            str(read_end),
            "--claim-until",
            str(claim_until),
            "--",
            *command,
        ],
        pass_fds=(read_end,),
        stderr=subprocess.PIPE,
    )
    os.close(read_end)
    return guardian, write_end


def _is_sleep(process: psutil.Process) -> bool:
    try:
        return bool(process.name() == "sleep")
    except psutil.Error:
        return False


def _child_of(guardian: subprocess.Popen[bytes]) -> psutil.Process:
    found: list[psutil.Process] = []

    def started() -> bool:
        found[:] = psutil.Process(guardian.pid).children()
        return bool(found)

    wait_until(started, 10, "the guardian to start its child")
    return found[0]


def test_a_confirmation_waiting_in_the_pipe_counts_before_the_deadline_is_judged() -> None:
    """On a loaded host the guardian once judged the claim it was started with (already past
    by the time it ran) before reading the supervisor's newer confirmation, and killed a
    healthy child: 'PRIMACY-1106 the claim lapsed unconfirmed'."""
    now = time.monotonic()
    guardian, control = _guardian(now - 1.0, f"claim {now + 30.0}\n".encode())
    try:
        child = _child_of(guardian)
        assert guardian.poll() is None and child.is_running()
        os.write(control, b"kill\n")
        guardian.wait(10)
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    finally:
        os.close(control)
        if guardian.poll() is None:
            guardian.kill()
        guardian.wait(10)


def test_without_a_newer_confirmation_a_lapsed_claim_never_starts_the_child(
    tmp_path: Path,
) -> None:
    """Issue 27: the guardian started its child before its first look at the deadline, so a
    claim that lapsed while it started (0.3-0.4 s on a loaded host) still ran the child."""
    started = tmp_path / "started"
    command = ("sh", "-c", f": > {started}; exec sleep 600")
    guardian, control = _guardian(time.monotonic() - 1.0, b"", command)
    try:
        _, stderr = guardian.communicate(timeout=10)
        assert guardian.returncode == CLAIM_LAPSED
        assert b"the claim lapsed unconfirmed before the child started: not starting it" in stderr
        assert not started.exists()
    finally:
        os.close(control)


def test_a_claim_confirmed_while_the_guardian_is_being_started_reaches_it() -> None:
    """Issue 27: a lease check that passed between the node's decision to start the child and
    the guardian's pipe being there was confirmed to no one, and the new guardian, hearing
    only of the check after it, killed a healthy child on a loaded host.

    Run in a process of its own: ``ChildControl`` stops every process below the one it runs
    in (a supervisor owns its whole tree), and this test's worker may have others, a Spark
    JVM of a session fixture say."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        pool.submit(_confirmed_while_the_guardian_starts).result(timeout=60)


def _confirmed_while_the_guardian_starts() -> None:
    posted: list[object] = []
    control = ChildControl(ChildProcess(["sleep", "600"], stop_grace_s=1.0), posted.append)
    # Started with a claim that has lapsed, then confirmed, all before the child's thread
    # runs: the guardian is started only after the confirmation, with no pipe to hear it on.
    control.start({}, claim_until=time.monotonic() - 1.0)
    control.confirm_claim(time.monotonic() + 60.0)
    control.start_thread()
    try:
        children: list[psutil.Process] = []

        def child_or_exit() -> bool:
            children[:] = [p for p in psutil.Process().children(recursive=True) if _is_sleep(p)]
            return bool(children) or bool(posted)

        wait_until(child_or_exit, 10, "the child to start, or its guardian to exit")
        assert posted == [] and children, f"the guardian ended: {posted}"
    finally:
        assert control.close(10)
