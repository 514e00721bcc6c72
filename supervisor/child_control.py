"""The exec child's own thread: starts it, watches it exit, stops its tree, off the role loop.

Stopping a child may take its whole grace period; on the role loop that would
stall lease checks and demotion, so the ``ChildProcess`` belongs to this thread
and the loop only sends it commands. ``stop`` takes a continuation that runs
on this thread once the tree is dead: the node releases the lock there, so a
child is always gone before the lock is free for another node's child.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from primacy.supervisor import codes, roles
from primacy.supervisor.children import ChildProcess

log = logging.getLogger("primacy.children")
_POLL_S = 0.1


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
    """Owns one ``ChildProcess`` on a thread of its own; posts ``roles.ChildExited``."""

    def __init__(self, child: ChildProcess, post: Callable[[roles.Event], None]) -> None:
        self._child = child
        self._post = post
        self._commands: queue.Queue[_Start | _Stop | _Quit] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="primacy-child", daemon=True)

    def start_thread(self) -> None:
        self._thread.start()

    def start(self, environment: Mapping[str, str]) -> None:
        self._commands.put(_Start(dict(environment)))

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
                    try:
                        self._child.start(environment)
                    except OSError as exc:  # not found, not executable: an exit like a shell's
                        log.error("%s the child could not start: %s", codes.CHILD_NOT_STARTED, exc)
                        self._post(roles.ChildExited(127))
                case _Stop(graceful=graceful, then=then):
                    self._child.stop(graceful=graceful)
                    then()
                case _Quit():
                    self._child.stop(graceful=True)
                    return
            code = self._child.poll_exit()
            if code is not None:
                log.warning("%s the child exited with code %d", codes.CHILD_EXITED, code)
                self._post(roles.ChildExited(code))
