"""The exec child's own thread: starts it, checks it is ready, watches it exit, stops its tree.

Stopping a child may take its whole grace period; on the role loop that would
stall lease checks and demotion, so the ``ChildProcess`` belongs to this thread
and the loop only sends it commands. ``stop`` takes a continuation that runs
on this thread once the tree is dead: the node releases the lock there, so a
child is always gone before the lock is free for another node's child. Claim
confirmations bypass the queue (``confirm_claim``): the guardian must hear them
while this thread waits out a graceful stop.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from primacy.supervisor import codes
from primacy.supervisor.child.child_ready import ReadyCheck
from primacy.supervisor.child.children import ChildProcess
from primacy.supervisor.machine import roles
from primacy.supervisor.shell.node_events import ChildReady

log = logging.getLogger("primacy.children")
_POLL_S = 0.1
# Exit codes the node counts like a child's own: a command that cannot be run (as a shell
# says it), and a child not ready within exec_ready_timeout_s (as timeout(1) says it).
NOT_STARTED = 127
NOT_READY = 124


@dataclass(frozen=True)
class _Start:
    environment: Mapping[str, str]


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
    ) -> None:
        self._child = child
        self._post = post
        self._new_ready_check = ready_check
        self._ready_timeout_s = ready_timeout_s
        self._check: ReadyCheck | None = None  # the running child's, until it passes
        self._ready_by = 0.0
        self._commands: queue.Queue[_Start | _Stop | _Quit] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="primacy-child", daemon=True)

    def start_thread(self) -> None:
        self._thread.start()

    def start(self, environment: Mapping[str, str], claim_until: float) -> None:
        """Start the child under a guardian that kills it at ``claim_until`` unless confirmed;
        the guardian starts later, on this thread, and gets the newest claim then."""
        self._child.confirm_claim(claim_until)
        self._commands.put(_Start(dict(environment)))

    def confirm_claim(self, until: float) -> None:
        """From the role loop: the claim now lasts until ``until`` (``time.monotonic``)."""
        self._child.confirm_claim(until)

    def stop(self, *, graceful: bool, then: Callable[[], None] = lambda: None) -> None:
        """Stop the child's tree (SIGTERM and grace, or SIGKILL at once), then call ``then``."""
        self._commands.put(_Stop(graceful, then))

    def close(self, timeout_s: float) -> bool:
        """Stop the tree gracefully and end the thread; False if it did not end in time."""
        self._commands.put(_Quit())
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            try:
                command = self._commands.get(timeout=_POLL_S)
            except queue.Empty:
                command = None
            match command:
                case _Start(environment=environment):
                    self._start(environment)
                case _Stop(graceful=graceful, then=then):
                    self._end_ready_check()
                    self._child.stop(graceful=graceful)
                    then()
                case _Quit():
                    self._end_ready_check()
                    self._child.stop(graceful=True)
                    return
            code = self._child.poll_exit()
            if code is not None:
                self._end_ready_check()
                log.warning("%s the child exited with code %d", codes.CHILD_EXITED, code)
                self._post(roles.ChildExited(code))
            elif self._check is not None:
                self._check_ready()

    def _start(self, environment: Mapping[str, str]) -> None:
        check = self._new_ready_check()
        try:
            self._child.start({**environment, **(check.environment() if check else {})})
        except OSError as exc:  # the guardian could not start: an exit like a shell's
            if check is not None:
                check.close()
            log.error("%s the child could not start: %s", codes.CHILD_NOT_STARTED, exc)
            self._post(roles.ChildExited(NOT_STARTED))
            return
        self._check, self._ready_by = check, time.monotonic() + self._ready_timeout_s

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
