"""The node may run above the default CPU priority; the broker its guardian starts does not.

Issue 47: on a busy host the node confirmed its exec child's claim late and the guardian
killed a healthy broker. primacy-exec@.service gives the node ``Nice=-5`` so the broker it
supervises cannot starve its lease checks; the guardian starts the broker at niceness 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from tests.harness.group import wait_until

BOOST = -5


def _boosted() -> None:
    os.nice(BOOST)


def test_the_child_runs_at_niceness_0_under_a_boosted_guardian() -> None:
    try:  # a probe: the guardian below gets the same boost in its preexec_fn
        probe = subprocess.run(
            [sys.executable, "-c", "import os; os.nice(-5)"], preexec_fn=_boosted, check=False
        )
    except subprocess.SubprocessError:
        probe = None
    if probe is None or probe.returncode != 0:
        pytest.skip("this host does not let the test raise a process's priority (no CAP_SYS_NICE)")
    read_end, write_end = os.pipe()
    guardian = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "primacy.supervisor.child.guardian",
            "--control-fd",
            str(read_end),
            f"--claim-until={time.monotonic() + 60.0!r}",
            "--",
            "sleep",
            "4748",
        ],
        pass_fds=(read_end,),
        preexec_fn=_boosted,
    )
    os.close(read_end)
    try:
        children: list[psutil.Process] = []

        def child_is_sleep() -> bool:
            children[:] = [
                p for p in psutil.Process(guardian.pid).children() if p.name() == "sleep"
            ]
            return bool(children)

        wait_until(child_is_sleep, 10, "the guardian to start its child")
        assert psutil.Process(guardian.pid).nice() == BOOST
        assert children[0].nice() == 0
    finally:
        os.write(write_end, b"kill\n")
        os.close(write_end)
        guardian.wait(10)
