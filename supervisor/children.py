"""The master's child process (``exec`` mode): start it, notice its exit, stop its whole tree.

The child runs in its own session, and the supervisor makes itself a child
subreaper, so grandchildren that daemonise are re-parented to us instead of
init and are still found and stopped on demotion.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence

import psutil

from primacy.supervisor import codes

log = logging.getLogger("primacy.children")

_PR_SET_CHILD_SUBREAPER = 36
# setpriv is part of util-linux, which every Debian system has.
_SETPRIV = shutil.which("setpriv")
_DIES_WITH_PARENT = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []


def become_subreaper() -> bool:
    """Ask Linux to re-parent orphaned descendants to this process. False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


class ChildProcess:
    """One external command run while this node is master."""

    def __init__(self, command: Sequence[str], stop_grace_s: float) -> None:
        if not command:
            raise ValueError("the exec command is empty")
        self.command = list(command)
        self.stop_grace_s = stop_grace_s
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self, environment: Mapping[str, str]) -> None:
        """Start the command in a new session with ``environment`` added to ours.

        The child gets SIGKILL the moment the thread that started it dies, which for a
        supervisor killed with SIGKILL (or by the OOM killer) is at once: through
        util-linux's ``setpriv --pdeathsig``, so no Python runs between fork and exec.
        Its own descendants are not covered by this (see docs/safety.md).
        """
        env = dict(os.environ)
        env.update(environment)
        self._process = subprocess.Popen(
            [*_DIES_WITH_PARENT, *self.command], env=env, start_new_session=True
        )
        log.info(
            "%s child started pid=%d command=%s",
            codes.CHILD_STARTED,
            self._process.pid,
            self.command,
        )

    def poll_exit(self) -> int | None:
        """The exit code if the child has exited since it was started, else None."""
        if self._process is None:
            return None
        code = self._process.poll()
        if code is None:
            return None
        self._process = None
        return code

    def stop(self, *, graceful: bool) -> None:
        """Stop the child and all descendants: SIGTERM, SIGKILL after the grace (or at once)."""
        tree = self._tree()
        if not tree:
            self._reap_orphans()
            return
        grace_s = self.stop_grace_s if graceful else 0.0
        first_signal = signal.SIGTERM if graceful else signal.SIGKILL
        for proc in tree:
            _signal(proc, first_signal)
        _, alive = psutil.wait_procs(tree, timeout=grace_s if graceful else 1.0)
        for proc in alive:
            _signal(proc, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=5.0)
        if self._process is not None:
            try:
                self._process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                log.error(
                    "%s child pid=%d did not die after SIGKILL",
                    codes.CHILD_NOT_KILLED,
                    self._process.pid,
                )
            self._process = None
        self._reap_orphans()
        log.info(
            "%s child tree stopped (%d processes, %s)",
            codes.CHILD_TREE_STOPPED,
            len(tree),
            "graceful" if graceful else "killed",
        )

    def _tree(self) -> list[psutil.Process]:
        """The child, its descendants, and orphans re-parented to us (daemonised grandchildren)."""
        found: dict[int, psutil.Process] = {}
        if self._process is not None:
            try:
                root = psutil.Process(self._process.pid)
                found[root.pid] = root
                for proc in root.children(recursive=True):
                    found[proc.pid] = proc
            except psutil.NoSuchProcess:
                pass
        # Orphans re-parented to us (we are a subreaper) are our children now.
        for proc in psutil.Process().children(recursive=True):
            found.setdefault(proc.pid, proc)
        return list(found.values())

    @staticmethod
    def _reap_orphans() -> None:
        # Collect exit statuses of re-parented descendants so no zombies linger.
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return


def _signal(proc: psutil.Process, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass
