"""A guardian that starts late still reads the confirmations its supervisor already sent."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from primacy.supervisor.child.guardian import CLAIM_LAPSED
from tests.harness.group import wait_until


def _guardian(claim_until: float, already_written: bytes) -> tuple[subprocess.Popen[bytes], int]:
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
            "sleep",
            "600",
        ],
        pass_fds=(read_end,),
    )
    os.close(read_end)
    return guardian, write_end


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


def test_without_a_newer_confirmation_a_lapsed_claim_still_kills_the_tree() -> None:
    guardian, control = _guardian(time.monotonic() - 1.0, b"")
    try:
        assert guardian.wait(10) == CLAIM_LAPSED
    finally:
        os.close(control)
