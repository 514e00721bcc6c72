"""An epoch's claimant, named as a process: whether it can still run, judged on real processes.

The takeover wait is skipped only when this says the previous master has ended,
so every doubt must answer "it may still run": a stopped process, another
kernel or PID namespace, and anything malformed from the (hostile) share.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import psutil
import pytest

from primacy.locker import claimant
from primacy.locker.claimant import this_process
from primacy.share.records import ProcessIdentity
from tests.harness.group import wait_until
from tests.supervisor.hidden_proc import (
    as_another_user,
    behind_hidden_proc,
    hidden_proc_unavailable_reason,
)


def _identity_of(pid: int) -> dict[str, Any]:
    """What ``this_process`` would have written in ``pid`` (same kernel and namespace)."""
    with open(f"/proc/{pid}/stat") as stat:
        start_ticks = int(stat.read().rpartition(")")[2].split()[19])
    mine = this_process()
    assert mine is not None
    return {**mine.to_json(), "pid": pid, "start_ticks": start_ticks}


def has_ended(raw: object) -> bool:
    """What a node concludes from an epoch record's identity: decoded, then looked up."""
    return claimant.has_ended(ProcessIdentity.from_json(raw))


def test_this_process_names_itself_and_has_not_ended() -> None:
    mine = this_process()
    assert mine is not None and mine.pid == os.getpid()
    assert mine.pid_namespace.startswith("pid:[")
    assert not claimant.has_ended(mine)


def test_a_running_or_stopped_process_has_not_ended_a_dead_one_has() -> None:
    child = subprocess.Popen(["sleep", "600"])
    try:
        identity = _identity_of(child.pid)
        assert not has_ended(identity)
        child.send_signal(signal.SIGSTOP)  # SIGCONT would resume it: still a claimant
        wait_until(lambda: psutil.Process(child.pid).status() == "stopped", 10, "the stop")
        assert not has_ended(identity)
        child.kill()
        wait_until(lambda: psutil.Process(child.pid).status() == "zombie", 10, "a zombie")
        assert has_ended(identity)  # not reaped yet: a zombie runs nothing
    finally:
        child.kill()
        child.wait(10)
    assert has_ended(identity)  # reaped: no such process


def test_a_reused_pid_is_not_the_claimant() -> None:
    child = subprocess.Popen(["sleep", "600"])
    try:
        identity = _identity_of(child.pid)
        assert not has_ended({**identity, "start_ticks": identity["start_ticks"]})
        # Same PID, another start time: a later process got the PID; the claimant is gone.
        assert has_ended({**identity, "start_ticks": identity["start_ticks"] + 1})
    finally:
        child.kill()
        child.wait(10)


@pytest.mark.parametrize(
    "forged",
    [
        None,
        "pid 1",
        {},
        {"boot_id": "00000000-0000-0000-0000-000000000000"},  # another kernel
        {"pid_namespace": "pid:[1]"},  # another namespace
        {"pid": True},
        {"pid": 0},
        {"pid": 2**40},
        {"pid": "12"},
        {"start_ticks": -1},
        {"start_ticks": 1.5},
        {"boot_id": "../../etc"},
    ],
)
def test_anything_but_an_identity_of_this_kernel_says_nothing(forged: object) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait(10)
    dead = _identity_of(os.getpid()) | {"pid": gone.pid, "start_ticks": 0}
    assert has_ended(dead)  # the honest record of a dead process does end the wait...
    record = {**dead, **forged} if isinstance(forged, dict) and forged else forged
    assert not has_ended(record)  # ...and every altered one keeps it


def _judged_behind_hidden_proc(identity: dict[str, Any]) -> bool:
    """``has_ended`` as a node whose /proc hides other users' processes concludes it."""
    judge = (
        "import json, sys; from primacy.locker import claimant;"
        "from primacy.share.records import ProcessIdentity;"
        "print(claimant.has_ended(ProcessIdentity.from_json(json.loads(sys.argv[1]))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", judge, json.dumps(identity)],
        preexec_fn=behind_hidden_proc,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return {"True\n": True, "False\n": False}[done.stdout]


def test_a_process_that_proc_hides_has_not_ended_until_the_kernel_says_it_is_gone() -> None:
    """With /proc mounted hidepid=2 (the unit's ProtectProc=invisible) and the nodes under
    different users, a new node once took a live master it could not see for a dead one and
    skipped the takeover wait: two masters answered 200 on /master for 0.925 s."""
    reason = hidden_proc_unavailable_reason()
    if reason:
        pytest.skip(reason)
    other_user = subprocess.Popen(["sleep", "600"], preexec_fn=as_another_user)
    try:
        identity = _identity_of(other_user.pid)
        assert not _judged_behind_hidden_proc(identity)
    finally:
        other_user.kill()
        other_user.wait(10)
    assert _judged_behind_hidden_proc(identity)  # no process has the PID: proof of an end
