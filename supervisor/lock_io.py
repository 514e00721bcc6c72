"""The lock I/O worker: runs the role loop's share operations one at a time on its own thread.

A hung share blocks this thread, not the role loop, which can then demote the
node when a lease check outlives its keepalive period.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from primacy.supervisor import roles

log = logging.getLogger("primacy.node")
T = TypeVar("T")


class LockIoWorker:
    """Runs lock and epoch operations one at a time on its own thread."""

    def __init__(self, post: Callable[[roles.Event], None]) -> None:
        self._post = post
        self._jobs: queue.Queue[Callable[[], roles.Event | None] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="primacy-lock-io", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], roles.Event | None]) -> None:
        self._jobs.put(job)

    def call(self, work: Callable[[], T], timeout_s: float = 10.0) -> T:
        """Run ``work`` on the worker after what is queued; return its result (other threads)."""
        done: Future[T] = Future()

        def job() -> None:
            try:
                done.set_result(work())
            except BaseException as exc:
                done.set_exception(exc)

        self.submit(job)
        return done.result(timeout_s)

    def close(self, timeout_s: float) -> bool:
        """Finish queued jobs; False if the worker is stuck (on a hung share)."""
        self._jobs.put(None)
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                event = job()
            except Exception:  # a bug in a job must not kill the worker silently
                log.exception("PRIMACY-1099 lock I/O job failed")
                continue
            if event is not None:
                self._post(event)
