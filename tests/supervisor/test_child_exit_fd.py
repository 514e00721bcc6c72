"""The descriptor the guardian and the child's thread wait on to hear of an exit at once."""

from __future__ import annotations

import os
import select
import signal
import subprocess

from primacy.supervisor.child.children import exit_fd


def test_the_exit_fd_turns_readable_when_the_child_dies_and_not_before() -> None:
    child = subprocess.Popen(["sleep", "60"])
    fd = exit_fd(child.pid)
    assert fd is not None, "this kernel refuses pidfd_open: the node would poll for exits"
    try:
        assert select.select([fd], [], [], 0)[0] == []
        child.send_signal(signal.SIGKILL)
        assert select.select([fd], [], [], 30)[0] == [fd]
        assert child.wait(5) == -signal.SIGKILL  # the descriptor reaps nothing
    finally:
        os.close(fd)
        if child.poll() is None:
            child.kill()
            child.wait()
