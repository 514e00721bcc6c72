"""The master's child process (``exec`` mode): start it under its guardian, stop its tree.

The child runs under a guardian process (``guardian.py``) that kills its whole
tree once the claim the supervisor confirms to it lapses, or the supervisor
dies, whatever the supervisor's state. The supervisor is a child subreaper too,
so should the guardian itself be killed, what it leaves is still found and
stopped here.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence

import psutil

from primacy.supervisor import codes

log = logging.getLogger("primacy.children")

_PR_SET_CHILD_SUBREAPER = 36
# The guardian's exit after a stop: its SIGKILLs are immediate, so this is generous.
_GUARDIAN_EXIT_S = 5.0


def become_subreaper() -> bool:
    """Ask Linux to re-parent orphaned descendants to this process. False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


class ChildProcess:
    """One external command run, under its guardian, while this node is master."""

    def __init__(self, command: Sequence[str], stop_grace_s: float) -> None:
        if not command:
            raise ValueError("the exec command is empty")
        self.command = list(command)
        self.stop_grace_s = stop_grace_s
        self._process: subprocess.Popen[bytes] | None = None  # the guardian
        self._control: int | None = None  # the write end of the guardian's control pipe
        self._exit_fd: int | None = None  # readable once the guardian has exited
        self._control_lock = threading.Lock()
        self._claim_until = float("-inf")  # the newest claim confirmed, for the next guardian

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def exit_fd(self) -> int | None:
        """A descriptor that turns readable when the guardian exits (None: none is running, or
        the kernel has no pidfd), to wait on rather than poll; closed once it is reaped."""
        return self._exit_fd

    def start(self, environment: Mapping[str, str], *, gated: bool = False) -> None:
        """Start the command under its guardian, with ``environment`` added to ours; the
        guardian kills its tree when the newest claim confirmed (``confirm_claim``) lapses.
        ``gated``: behind a closed gate instead, with no claim needed until ``open_gate``."""
        with self._control_lock:
            claim_until = self._claim_until
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)  # systemd's is the supervisor's; a readiness check may
        env.update(environment)  # give the child one of its own (child_ready.py)
        read_end, write_end = os.pipe()
        try:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "primacy.supervisor.child.guardian",
                    "--control-fd",
                    str(read_end),
                    f"--claim-until={claim_until!r}",  # one word: "-inf" is no option
                    *(["--gate"] if gated else []),
                    "--",
                    *self.command,
                ],
                env=env,
                pass_fds=(read_end,),
                start_new_session=True,  # a signal to the supervisor's group is not for it
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        os.set_blocking(write_end, False)
        self._exit_fd = exit_fd(self._process.pid)  # not reaped yet: the pid is still its own
        with self._control_lock:
            self._control = write_end
            if self._claim_until != claim_until:  # confirmed while the guardian was started
                self._write(f"claim {self._claim_until!r}\n")
        log.info(
            "%s child started under guardian pid=%d command=%s",
            codes.CHILD_STARTED,
            self._process.pid,
            self.command,
        )

    def confirm_claim(self, until: float) -> None:
        """Tell the guardian the claim now lasts until ``until``; from any thread, never blocks.

        Kept for the next guardian too: one confirmed while a guardian is being started
        (no pipe yet) is what that guardian needs next, and once was lost, so the new
        guardian heard of the lease check after next too late and killed a healthy child on
        a loaded host (issue 27). A message that cannot be written is dropped: the guardian
        then kills sooner, the safe way round."""
        with self._control_lock:
            self._claim_until = until
            self._write(f"claim {until!r}\n")

    def open_gate(self, epoch: int) -> None:
        """Ask the guardian to open the child's gate for ``epoch`` on the newest claim
        confirmed; if that claim has lapsed when it reads, the gate stays shut until the next."""
        with self._control_lock:
            self._write(f"open {epoch} {self._claim_until!r}\n")

    def poll_exit(self) -> int | None:
        """The exit code if the child has exited since it was started, else None."""
        if self._process is None:
            return None
        code = self._process.poll()
        if code is None:
            return None
        self._forget()
        return 128 - code if code < 0 else code

    def stop(self, *, graceful: bool) -> None:
        """Stop the child and all descendants: SIGTERM, SIGKILL after the grace (or at once)."""
        process = self._process
        guardian = process.pid if process is not None else None
        tree = [p for p in descendants() if p.pid != guardian]  # for the log: what gets stopped
        if process is not None:
            self._tell(f"stop {self.stop_grace_s!r}\n" if graceful else "kill\n")
            wait_s = (self.stop_grace_s if graceful else 0.0) + _GUARDIAN_EXIT_S
            try:
                process.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                log.error(
                    "%s the guardian pid=%d did not end its child's tree; killing it all here",
                    codes.CHILD_NOT_KILLED,
                    process.pid,
                )
            self._forget()
        # A guardian that did not answer, and what it left: orphans re-parented to us (we are a
        # subreaper) should the guardian have died before its tree.
        leftovers = descendants()
        for proc in leftovers:
            _signal(proc, signal.SIGKILL)
        psutil.wait_procs(leftovers, timeout=5.0)
        if process is not None and process.poll() is None:
            try:
                process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                log.error(
                    "%s guardian pid=%d did not die after SIGKILL",
                    codes.CHILD_NOT_KILLED,
                    process.pid,
                )
        reap_exited()
        if process is not None or leftovers:
            log.info(
                "%s child tree stopped (%d processes, %s)",
                codes.CHILD_TREE_STOPPED,
                len(tree),
                "graceful" if graceful else "killed",
            )

    def _tell(self, message: str) -> None:
        with self._control_lock:
            self._write(message)

    def _write(self, message: str) -> None:
        """With ``_control_lock`` held."""
        if self._control is None:
            return
        try:
            os.write(self._control, message.encode())
        except (BlockingIOError, BrokenPipeError):
            pass

    def _forget(self) -> None:
        """The guardian has exited: close our end of its pipe."""
        with self._control_lock:
            if self._control is not None:
                os.close(self._control)
                self._control = None
        if self._exit_fd is not None:
            os.close(self._exit_fd)
            self._exit_fd = None
        self._process = None


def exit_fd(pid: int) -> int | None:
    """A pidfd of ``pid``, a child of ours not yet reaped: readable once it exits, so a
    waiter hears of the exit at once instead of at its next poll. None where the kernel
    (before 5.3) or a sandbox refuses it: callers poll then, as they do anyway."""
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def descendants() -> list[psutil.Process]:
    """Every process below this one (orphans re-parented to a subreaper included)."""
    try:
        below: list[psutil.Process] = psutil.Process().children(recursive=True)
        return below
    except psutil.Error:
        return []


def reap_exited() -> None:
    """Collect the exit status of every exited child, so no zombie lingers."""
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
