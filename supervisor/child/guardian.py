"""The exec child's guardian: a small process that kills the child's tree when the claim lapses.

The supervisor cannot be trusted to stop its child: it may be SIGKILLed, OOM
killed, stopped with SIGSTOP or stuck on a hung share. So the child runs under
this process, which does no share I/O and holds only a deadline. It kills
every process below it (it is a child subreaper, so daemonised descendants
stay below it):

- when the deadline passes: the supervisor confirms its claim after every
  lease check it passes (``claim T``, T on CLOCK_MONOTONIC, which every process
  of the machine shares, already ``GUARDIAN_KILL_LEAD`` of a keepalive before
  the claim's end) and stops confirming when the check fails, hangs, or the
  supervisor is stopped;
- when the control pipe closes: the supervisor died;
- when told to (``stop GRACE``: SIGTERM, SIGKILL after GRACE or at the
  deadline, whichever is first; ``kill``: SIGKILL at once);
- when the child exits: whatever it left behind.

With ``--gate`` (the warm standby) the child inherits the read end of a pipe whose
write end only this process holds (``gate.py``) and waits on it before it touches
the store. Until the gate opens the claim's deadline does not apply (a standby has
no claim and cannot use one); the supervisor asks ``open EPOCH UNTIL`` once its
node is master, and the gate opens once a claim of that tenure (UNTIL, or a
``claim`` written after the request) is ahead when read; until then it stays shut.
From then on, the rules above.

It exits with the child's code (128 + signal for a signal), or ``CLAIM_LAPSED``. It
judges the claim before it starts the child too, and never starts one whose claim has
lapsed (or whose supervisor is gone) while the guardian itself was starting.
docs/safety.md, "The exec child", gives the argument. Run as
``python -m primacy.supervisor.child.guardian --control-fd N --claim-until T -- CMD ARGS``.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

import psutil

from primacy.supervisor import codes
from primacy.supervisor.child.children import (
    become_subreaper,
    descendants,
    exit_fd,
    reap_exited,
)
from primacy.supervisor.child.gate import GATE_FD_VARIABLE
from primacy.supervisor.machine.role_events import CLAIM_LAPSED_EXIT

# Exit code when the guardian killed the tree because the claim lapsed or the supervisor died
# (the role machine does not count it as the child's crash).
CLAIM_LAPSED: int = CLAIM_LAPSED_EXIT
# The child's exit and the supervisor's pipe wake the guardian at once (exit_fd); the poll
# is for a kernel without pidfds, and a bound on any wait.
_POLL_S = 0.05
# setpriv is part of util-linux, which every Debian system has: the child gets SIGKILL
# the moment the guardian dies, with no Python between fork and exec.
_SETPRIV = shutil.which("setpriv")
_DIES_WITH_PARENT = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []
_NICE = shutil.which("nice")  # coreutils
_LAPSED = "the claim lapsed unconfirmed"


def _at_default_priority() -> list[str]:
    """A prefix that starts the child at niceness 0 when the node runs above it.

    A unit may give the node a higher CPU priority (``Nice=-5`` in primacy-exec@.service) so
    its lease checks and claim confirmations are not starved by the broker it supervises on
    a busy host (issue 47); the broker is not to inherit it. Raising one's own niceness
    needs no privilege."""
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    return [_NICE, "-n", str(-niceness), "--"] if niceness < 0 and _NICE else []


def _log(code: str, message: str) -> None:
    print(f"{code} guardian {os.getpid()}: {message}", file=sys.stderr, flush=True)


def _signal_tree(sig: int, child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, sig)  # the child's session, in one call
    except OSError:
        pass
    for proc in descendants():
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass


def kill_tree(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL everything below this process until nothing is left (a fork may race a walk)."""
    while True:
        _signal_tree(signal.SIGKILL, child)
        psutil.wait_procs(descendants(), timeout=1.0)
        child.poll()  # the child's own status goes to ``child``
        reap_exited()
        if not descendants():
            return


class Guardian:
    def __init__(self, control_fd: int, claim_until: float, *, gated: bool = False) -> None:
        self.control_fd = control_fd
        self.claim_until = claim_until
        # The gate's write end, held by this process alone; None: no gate (cold start).
        self._gate: int | None = None
        self._opened = not gated  # the claim's deadline applies once the gate is open
        # An open asked for whose claim had lapsed when read: (epoch, newest claim since).
        self._open_asked: tuple[int, float] | None = None
        self._pending = b""
        self._stop_by: float | None = None  # a graceful stop's SIGKILL time
        self._child: subprocess.Popen[bytes] | None = None

    def start(self, command: Sequence[str]) -> int:
        """Start ``command`` and guard it to its end; returns the guardian's exit code.

        Judged before the child starts, as after: a guardian that took longer to start
        than the claim lasts (a third of a second on a loaded host, past the 250 ms
        keepalive) would otherwise run the child, however briefly, without a claim."""
        pass_fds: tuple[int, ...] = ()
        env = None
        if not self._opened:  # made first: an open read below writes to it
            read_end, self._gate = os.pipe()  # both close-on-exec; only read_end is passed
            pass_fds, env = (read_end,), {**os.environ, GATE_FD_VARIABLE: str(read_end)}
        try:
            why = self._why_the_tree_must_die()
            if why is not None:
                _log(codes.CHILD_CLAIM_LAPSED, f"{why} before the child started: not starting it")
                return CLAIM_LAPSED
            if self._stop_by is not None:
                return 0  # stopped before it started: nothing to stop
            self._child = subprocess.Popen(
                [*_DIES_WITH_PARENT, *_at_default_priority(), *command],
                start_new_session=True,
                pass_fds=pass_fds,
                env=env,
            )
        except OSError as exc:
            _log(codes.CHILD_NOT_STARTED, f"cannot start {command}: {exc}")
            return 127
        finally:
            for fd in pass_fds:
                os.close(fd)
        return self._guard(self._child)

    def _guard(self, child: subprocess.Popen[bytes]) -> int:
        # Woken by the child's exit as by the supervisor's pipe: a warm standby takes over
        # as soon as this node hears its broker died, not a poll later.
        exited = exit_fd(child.pid)
        try:
            return self._guard_until_the_end(child, exited)
        finally:
            if exited is not None:
                os.close(exited)

    def _guard_until_the_end(self, child: subprocess.Popen[bytes], exited: int | None) -> int:
        while True:
            why = self._why_the_tree_must_die()
            if why is not None:
                note = self._deadline_note() if why == _LAPSED else ""
                _log(codes.CHILD_CLAIM_LAPSED, f"{why}: killing the tree{note}")
                return self._killed(child, CLAIM_LAPSED)
            now = time.monotonic()
            if self._stop_by is not None and now >= self._stop_by:
                return self._killed(child, None)
            if child.poll() is not None:
                kill_tree(child)  # what it left behind
                return _exit_code(child)
            claim_until = self.claim_until if self._opened else float("inf")
            wake = min(claim_until, self._stop_by or float("inf"), now + _POLL_S)
            watched = [self.control_fd] if exited is None else [self.control_fd, exited]
            select.select(watched, [], [], max(0.0, wake - now))  # read at the top of the loop

    def _why_the_tree_must_die(self) -> str | None:
        """Why no child may run now, or None.

        What the supervisor already wrote counts before the deadline is judged: a guardian
        that started late on a loaded host once killed a healthy child whose claim was
        confirmed in its pipe. Each confirmation names its own end (an absolute monotonic
        time the supervisor's lease check vouched for), so reading it late never stretches
        a claim."""
        if self._readable(0.0) and not self._read_commands():
            return "the supervisor is gone"
        if self._opened and time.monotonic() >= self.claim_until:
            return _LAPSED
        return None

    def _deadline_note(self) -> str:
        """The deadline a lapsed claim's kill answers to, on CLOCK_MONOTONIC (which every
        process of the machine shares), and how late the guardian acted on it: an operator
        (and a test) can check the claim against the lease check that confirmed it, and
        bench/claim_lapse_load.py reads the lateness."""
        late_ms = (time.monotonic() - self.claim_until) * 1000
        ended = f"the claim ended at monotonic {self.claim_until:.6f} s"
        return f" ({ended}; acted {late_ms:.0f} ms after)"

    def _readable(self, timeout_s: float) -> bool:
        readable, _, _ = select.select([self.control_fd], [], [], timeout_s)
        return bool(readable)

    def _read_commands(self) -> bool:
        """Apply what the supervisor wrote; False once it closed the pipe (it died)."""
        data = os.read(self.control_fd, 4096)
        if not data:
            return False
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            verb, _, value = line.decode("ascii", "replace").partition(" ")
            if verb == "claim":
                self.claim_until = float(value)
                if self._open_asked is not None:
                    self._open(self._open_asked[0], self.claim_until)
            elif verb == "stop" and self._stop_by is None:
                self._stop_by = time.monotonic() + float(value)
                if self._child is not None:
                    _signal_tree(signal.SIGTERM, self._child)
            elif verb == "kill":
                self._stop_by = time.monotonic()
            elif verb == "open":
                epoch, _, until = value.partition(" ")
                self._open(int(epoch), float(until))
        return True

    def _open(self, epoch: int, until: float) -> None:
        """Open the gate for ``epoch`` if the claim ``until`` is still ahead; else keep the
        request for the tenure's next claim (only the tenure's claims follow the request in
        the pipe: the next tenure has a guardian of its own). Reading late, on a guardian
        started on a loaded host, never opens the gate on a lapsed claim, and no longer
        kills a standby whose node's next lease check is already in the pipe."""
        if self._opened or self._stop_by is not None:  # a stop outranks a late open
            return
        if time.monotonic() >= until:
            if self._open_asked is None:
                _log(codes.CHILD_CLAIM_LAPSED, "asked to open the gate on a claim that had lapsed "
                     "when read: it stays shut until the next claim")  # fmt: skip
            self._open_asked = (epoch, until)
            return
        self._open_asked = None
        self.claim_until, self._opened = until, True
        assert self._gate is not None
        # One line under PIPE_BUF into an empty pipe: written whole, never blocks. The write
        # end stays open: its end of file then tells the child this guardian is gone.
        os.write(self._gate, f"{epoch}\n".encode())
        _log(codes.GATE_OPENED, f"the gate is open for epoch {epoch}")

    def _killed(self, child: subprocess.Popen[bytes], code: int | None) -> int:
        kill_tree(child)
        return code if code is not None else _exit_code(child)


def _exit_code(child: subprocess.Popen[bytes]) -> int:
    code = child.wait()
    return 128 - code if code < 0 else code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="primacy-guardian", description=__doc__)
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--claim-until", type=float, required=True)
    parser.add_argument("--gate", action="store_true", help="start the child behind a gate")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    # The supervisor stops the child through the pipe; a terminal's or a unit's signal meant
    # for the supervisor must not end the guardian and leave the child unguarded. A handler,
    # not SIG_IGN: an ignored signal would stay ignored in the child across exec.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    become_subreaper()
    return Guardian(args.control_fd, args.claim_until, gated=args.gate).start(command)


if __name__ == "__main__":
    sys.exit(main())
