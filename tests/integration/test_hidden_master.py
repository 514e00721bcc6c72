"""A live master that /proc hides from the next node is waited out, not taken for dead.

The shipped unit's ``ProtectProc=invisible`` hides other users' processes. A
node that could not see the old master (another user's, behind a ``hidepid=2``
/proc) once concluded "the previous master's process has ended" and skipped the
takeover wait while that master still served: both answered 200 on ``/master``
for 0.925 s. The shortcut now needs positive proof (docs/safety.md, "A master
whose process has ended has nothing to outlast").

Needs root: the old master runs as ``nobody``, the new node as root without
CAP_SYS_PTRACE in a mount namespace of its own with a ``hidepid=2`` /proc
(tests/supervisor/hidden_proc.py).
"""

from __future__ import annotations

import os
import subprocess
import time

import httpx
import pytest

from primacy.share.layout import LOCK_FILE_NAME
from tests.harness.group import Group, MasterPoller, NodeProcess, wait_until
from tests.supervisor.hidden_proc import (
    as_another_user,
    behind_hidden_proc,
    hidden_proc_unavailable_reason,
)

pytestmark = pytest.mark.slow

OLD_KEEP_ALIVE_MS = 2000  # the old master claims up to 2 s after each lease check
# Once its lease check sees the lock lost, the old master is a slave too: it would race the
# new node for the replaced lock file. Knowing a higher-priority node is live, it leaves a free
# lock to it for two priority levels times this, so the new node (default 100 ms) wins.
OLD_LOCK_INTERVAL_MS = 30_000
NO_WAIT = "process has ended: no takeover wait"


@pytest.fixture
def hidden_proc() -> None:
    reason = hidden_proc_unavailable_reason()
    if reason:
        print(f"skipped: {reason}")
        pytest.skip(reason)


@pytest.mark.usefixtures("hidden_proc")
def test_a_master_the_new_node_cannot_see_is_waited_out(group: Group) -> None:
    old = group.start(
        "old",
        "--lock-keep-alive-period-ms",
        str(OLD_KEEP_ALIVE_MS),
        "--lock-acquire-sleep-interval-ms",
        str(OLD_LOCK_INTERVAL_MS),
        preexec_fn=as_another_user,
    )
    wait_until(old.is_master, 30, "the old master to serve")
    new = group.start("new", "--priority", "highest", preexec_fn=behind_hidden_proc)
    wait_until(lambda: new.status("/slave") == 200, 30, "the new node to stand by")
    wait_until(
        lambda: _lists_live(old, "new"), 30, "the old master to know the new node's priority"
    )
    # A process set up as the new node was sees no old master in its /proc.
    looked = subprocess.run(["ls", f"/proc/{old.pid}"], preexec_fn=behind_hidden_proc, timeout=30)
    assert looked.returncode != 0
    with MasterPoller([old, new]) as poller:
        # The old master loses its lock without knowing until its next lease check: an
        # operator deletes the lock file, and the new node recreates and takes it.
        replacement = group.share / "lock-replacement"
        replacement.write_text("")
        replaced_at = time.monotonic()
        os.replace(replacement, group.share / LOCK_FILE_NAME)
        wait_until(new.is_master, 30, "the new node to take over", interval_s=0.005)
        took_over_s = time.monotonic() - replaced_at
        wait_until(lambda: old.status("/master") == 503, 30, "the old master to step down")
    assert poller.two_masters() == []
    assert NO_WAIT not in new.log()
    assert "the previous master's process is hidden from this node" in new.log()
    # It outlasted the old master's claim (1.1 x its keepalive), though it could not see it.
    assert took_over_s >= OLD_KEEP_ALIVE_MS / 1000 * 1.1, took_over_s


def _lists_live(node: NodeProcess, other: str) -> bool:
    members = httpx.get(f"http://127.0.0.1:{node.port}/cluster", timeout=5).json()["members"]
    return any(m["node_id"] == other and m["live"] for m in members)
