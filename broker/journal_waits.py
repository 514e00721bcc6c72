"""The journal's futures, handed to the event loop in one wake-up per batch.

The writer thread completes a whole batch's futures at once. Wrapping each with
``asyncio.wrap_future`` would cost one ``call_soon_threadsafe`` (a write to the
loop's self-pipe, a wake-up, a callback) per record. Here each completion is only
noted, and the writer's completion listener, told once per batch after the last
of them, wakes the loop once to settle them all.

Only this module's lock is shared: ``_collect`` and ``batch_done`` run on the
writer thread, ``watch`` and ``_drain`` on the loop.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

Completed = tuple[Future[int], asyncio.Future[int]]


class JournalWaits:
    """Loop-side futures for journal writes; ``wakeups`` counts the loop wake-ups spent."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._completed: list[Completed] = []
        self._wake_pending = False
        self._loop_thread: int | None = None  # learnt at the first watch, which runs there
        self.wakeups = 0

    def watch(self, written: Future[int]) -> asyncio.Future[int]:
        """A future on the loop that ends as ``written`` does. Call on the loop's thread."""
        self._loop_thread = threading.get_ident()
        future: asyncio.Future[int] = self._loop.create_future()
        written.add_done_callback(lambda done: self._collect(done, future))
        return future

    def batch_done(self) -> None:
        """The writer completed a batch: wake the loop once for all that it completed."""
        with self._lock:
            if not self._completed or self._wake_pending:
                return
            self._wake_pending = True
        try:
            self._loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _collect(self, written: Future[int], future: asyncio.Future[int]) -> None:
        if threading.get_ident() == self._loop_thread:
            # Done before it was watched (no_sync acknowledges at submit): no wake-up needed,
            # and no batch_done would come for it.
            _settle(written, future)
            return
        with self._lock:
            self._completed.append((written, future))

    def _drain(self) -> None:
        with self._lock:
            completed, self._completed = self._completed, []
            self._wake_pending = False
        self.wakeups += 1
        for written, future in completed:
            _settle(written, future)


def _settle(written: Future[int], future: asyncio.Future[int]) -> None:
    if future.done():  # cancelled by its waiter meanwhile
        return
    if written.cancelled():
        future.cancel()
    elif (error := written.exception()) is not None:
        future.set_exception(error)
    else:
        future.set_result(written.result())
