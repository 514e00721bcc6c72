"""The lock I/O worker: runs the role loop's share operations one at a time on its own thread.

A hung share blocks this thread, not the role loop, which can then demote the
node when a lease check outlives its keepalive period. A job that raises is
turned into its failure event (``on_error``), so whatever the share holds, the
role loop always hears how a job it started ended.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from primacy.supervisor import codes
from primacy.supervisor.shell.thread_deaths import ThreadDeaths, owned_thread

log = logging.getLogger("primacy.node")
T = TypeVar("T")
Job = Callable[[], object | None]
OnError = Callable[[BaseException], object | None]


def _no_event(_: BaseException) -> None:
    return None


class LockIoWorker:
    """Runs lock and epoch operations one at a time on its own thread."""

    def __init__(
        self,
        post: Callable[[Any], None],
        deaths: ThreadDeaths | None = None,
        name: str = "primacy-lock-io",
    ) -> None:
        self._post = post
        self._jobs: queue.Queue[tuple[Job, OnError] | None] = queue.Queue()
        self._thread = owned_thread(deaths, self._work, name)
        self._thread.start()

    def submit(self, job: Job, on_error: OnError = _no_event) -> None:
        """Run ``job`` after what is queued and post the event it returns, or, if it raises,
        the event ``on_error`` makes of the exception."""
        self._jobs.put((job, on_error))

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
        while (item := self._jobs.get()) is not None:
            job, on_error = item
            try:
                event = job()
            except Exception as exc:  # garbage on the share, or a bug: the loop must hear of it
                log.exception("%s lock I/O job failed: %s", codes.LOCK_JOB_FAILED, exc)
                event = on_error(exc)
            if event is not None:
                self._post(event)
