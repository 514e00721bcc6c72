"""The exec child's own thread: starts it, checks it is ready, watches it exit, stops its tree.

Stopping a child may take its whole grace period; on the role loop that would
stall lease checks and demotion, so the ``ChildProcess`` belongs to this thread
and the loop only sends it commands. ``stop`` takes a continuation that runs
on this thread once the tree is dead: the node releases the lock there, so a
child is always gone before the lock is free for another node's child. Claim
confirmations bypass the queue (``confirm_claim``): the guardian must hear them
while this thread waits out a graceful stop.

In warm standby mode (``exec_warm_standby``) a slave keeps a child started behind a
closed gate (``stand_by``) and promotion opens it (``open``); a standby that exits is
started again here, after ``STANDBY_RESTART_S``, without the node hearing of it: it
served nothing. Once the gate is open the child is a master's, as in the cold mode.
"""

from __future__ import annotations

import logging
import os
import queue
import select
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from primacy.supervisor import codes
from primacy.supervisor.child.child_ready import ReadyCheck
from primacy.supervisor.child.children import ChildProcess
from primacy.supervisor.machine import roles
from primacy.supervisor.shell.node_events import ChildReady
from primacy.supervisor.shell.thread_deaths import ThreadDeaths, owned_thread

log = logging.getLogger("primacy.children")
# The thread wakes at once for a command or the guardian's exit; it polls for the rest: a
# standby's restart time, and a readiness check, which it tries every _READY_POLL_S so that
# a promoted warm standby is reported ready (and /master answers 200) soon after it listens.
_POLL_S = 0.1
_READY_POLL_S = 0.02
# Exit codes the node counts like a child's own: a command that cannot be run (as a shell
# says it), and a child not ready within exec_ready_timeout_s (as timeout(1) says it).
NOT_STARTED = 127
NOT_READY = 124
# How long a standby that exited behind its gate waits before the next one starts.
STANDBY_RESTART_S = 1.0


@dataclass(frozen=True)
class _Start:
    environment: Mapping[str, str]


@dataclass(frozen=True)
class _StandBy:
    environment: Mapping[str, str]


@dataclass(frozen=True)
class _Open:
    environment: Mapping[str, str]
    epoch: int


@dataclass(frozen=True)
class _Stop:
    graceful: bool
    then: Callable[[], None]


@dataclass(frozen=True)
class _Quit:
    pass


class ChildControl:
    """Owns one ``ChildProcess`` on a thread of its own; posts ``ChildExited`` and
    ``ChildReady``."""

    def __init__(
        self,
        child: ChildProcess,
        post: Callable[[roles.Event | ChildReady], None],
        ready_check: Callable[[], ReadyCheck | None] = lambda: None,
        ready_timeout_s: float = float("inf"),
        deaths: ThreadDeaths | None = None,
    ) -> None:
        self._child = child
        self._post = post
        self._new_ready_check = ready_check
        self._ready_timeout_s = ready_timeout_s
        self._check: ReadyCheck | None = None  # the running child's, until it passes
        self._ready_by = 0.0
        self._commands: queue.Queue[_Start | _StandBy | _Open | _Stop | _Quit] = queue.Queue()
        # A byte per command, so the thread can wait on commands and the guardian's exit at once.
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._wake_lock = threading.Lock()  # no byte is written once the pipe is closed
        # The running child's gate: None for none (cold), False closed, True open.
        self._gate_open: bool | None = None
        self._standby: Mapping[str, str] | None = None  # a standby's environment, while wanted
        self._standby_at = 0.0
        self._thread = owned_thread(deaths, self._run, "primacy-child")

    def start_thread(self) -> None:
        self._thread.start()

    def start(self, environment: Mapping[str, str], claim_until: float) -> None:
        """Start the child under a guardian that kills it at ``claim_until`` unless confirmed;
        the guardian starts later, on this thread, and gets the newest claim then."""
        self._child.confirm_claim(claim_until)
        self._send(_Start(dict(environment)))

    def stand_by(self, environment: Mapping[str, str]) -> None:
        """Keep a child running behind a closed gate (started now unless one is)."""
        self._send(_StandBy(dict(environment)))

    def open(self, environment: Mapping[str, str], epoch: int, claim_until: float) -> None:
        """Open the standby's gate for ``epoch`` (a child is started behind a gate and opened
        at once if none is standing by); the claim is ``start``'s."""
        self._child.confirm_claim(claim_until)
        self._send(_Open(dict(environment), epoch))

    def confirm_claim(self, until: float) -> None:
        """From the role loop: the claim now lasts until ``until`` (``time.monotonic``)."""
        self._child.confirm_claim(until)

    def stop(self, *, graceful: bool, then: Callable[[], None] = lambda: None) -> None:
        """Stop the child's tree (SIGTERM and grace, or SIGKILL at once), then call ``then``."""
        self._send(_Stop(graceful, then))

    def close(self, timeout_s: float) -> bool:
        """Stop the tree gracefully and end the thread; False if it did not end in time."""
        self._send(_Quit())
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _send(self, command: _Start | _StandBy | _Open | _Stop | _Quit) -> None:
        self._commands.put(command)
        with self._wake_lock:
            if self._wake_write >= 0:
                try:
                    os.write(self._wake_write, b"\0")
                except BlockingIOError:
                    pass  # the pipe is full of wake-ups already: the thread will look

    def _next_command(self) -> _Start | _StandBy | _Open | _Stop | _Quit | None:
        """The next command, waiting at most a poll for one, or for the guardian to exit."""
        try:
            return self._commands.get_nowait()
        except queue.Empty:
            pass
        watched = [self._wake_read]
        if self._child.exit_fd is not None:
            watched.append(self._child.exit_fd)
        checking = self._check is not None and self._gate_open is not False
        select.select(watched, [], [], _READY_POLL_S if checking else _POLL_S)
        try:
            while os.read(self._wake_read, 4096):
                pass
        except BlockingIOError:
            pass
        try:
            return self._commands.get_nowait()
        except queue.Empty:
            return None

    def _run(self) -> None:
        try:
            self._serve_commands()
        finally:
            with self._wake_lock:
                os.close(self._wake_read)
                os.close(self._wake_write)
                self._wake_read = self._wake_write = -1

    def _serve_commands(self) -> None:
        while True:
            command = self._next_command()
            match command:
                case _Start(environment=environment):
                    self._start(environment)
                case _StandBy(environment=environment):
                    self._standby = environment
                    if self._child.pid is None:
                        self._start(environment, gated=True)
                case _Open(environment=environment, epoch=epoch):
                    self._open(environment, epoch)
                case _Stop(graceful=graceful, then=then):
                    self._standby = None
                    self._stop(graceful)
                    then()
                case _Quit():
                    self._standby = None
                    self._stop(graceful=True)
                    return
            code = self._child.poll_exit()
            if code is not None:
                self._exited(code)
            elif self._check is not None and self._gate_open is not False:
                self._check_ready()
            elif self._standby is not None and self._standby_due():
                self._start(self._standby, gated=True)

    def _standby_due(self) -> bool:
        return self._child.pid is None and time.monotonic() >= self._standby_at

    def _start(self, environment: Mapping[str, str], *, gated: bool = False) -> bool:
        check = self._new_ready_check()
        try:
            self._child.start(
                {**environment, **(check.environment() if check else {})}, gated=gated
            )
        except OSError as exc:  # the guardian could not start: an exit like a shell's
            if check is not None:
                check.close()
            log.error("%s the child could not start: %s", codes.CHILD_NOT_STARTED, exc)
            if gated and self._standby is not None:
                self._standby_at = time.monotonic() + STANDBY_RESTART_S
            else:
                self._post(roles.ChildExited(NOT_STARTED))
            return False
        self._check, self._ready_by = check, time.monotonic() + self._ready_timeout_s
        self._gate_open = False if gated else None
        return True

    def _open(self, environment: Mapping[str, str], epoch: int) -> None:
        """Promotion: open the standby's gate, or start a child behind one and open it."""
        self._standby = None
        if self._child.pid is None or self._gate_open is not False:
            self._stop(graceful=False)  # what is left of an opened child (a restart as master)
            if not self._start(environment, gated=True):
                return
        self._child.open_gate(epoch)
        self._gate_open = True
        # Readiness counts from the open: what the child said behind the gate does not count.
        if self._check is not None:
            self._check.forget()
        self._ready_by = time.monotonic() + self._ready_timeout_s

    def _stop(self, graceful: bool) -> None:
        self._end_ready_check()
        self._child.stop(graceful=graceful)
        self._gate_open = None

    def _exited(self, code: int) -> None:
        self._end_ready_check()
        behind_gate, self._gate_open = self._gate_open is False, None
        if behind_gate and self._standby is not None:
            log.warning(
                "%s the standby exited with code %d behind its closed gate; a fresh one starts "
                "in %s s",
                codes.STANDBY_EXITED,
                code,
                STANDBY_RESTART_S,
            )
            self._standby_at = time.monotonic() + STANDBY_RESTART_S
            return
        if code == roles.CLAIM_LAPSED_EXIT:
            log.warning(
                "%s the guardian killed the child: this node's claim lapsed unconfirmed (exit "
                "code %d); not counted as a crash, it starts again once a lease check passes",
                codes.CLAIM_LAPSE_NOT_A_CRASH,
                code,
            )
        else:
            log.warning("%s the child exited with code %d", codes.CHILD_EXITED, code)
        self._post(roles.ChildExited(code))

    def _check_ready(self) -> None:
        assert self._check is not None
        now = time.monotonic()
        if self._check.passed(now):
            log.info("%s the child passed %s", codes.CHILD_READY, self._check.description)
            self._end_ready_check()
            self._post(ChildReady())
        elif now >= self._ready_by:
            log.error(
                "%s the child did not pass %s within %s s; killing its tree",
                codes.CHILD_NOT_READY,
                self._check.description,
                self._ready_timeout_s,
            )
            self._end_ready_check()
            self._child.stop(graceful=False)
            self._post(roles.ChildExited(NOT_READY))

    def _end_ready_check(self) -> None:
        if self._check is not None:
            self._check.close()
            self._check = None
