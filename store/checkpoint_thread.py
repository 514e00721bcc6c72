"""Checkpoints written on a thread of their own, off the journal writer's.

Writing one encodes every pending message and the whole dedupe window, then syncs the file
and its directory: 215 ms at 200 000 messages pending on a quiet machine, more as the backlog
grows. On the writer's thread every commit, so every RECEIPT, waited meanwhile, a latency
spike every ``checkpoint_interval_records``. The writer now only takes what the checkpoint
holds between two batches (``JournalState.snapshot``: copies of its containers, whose
messages are immutable tuples shared with the live state, 23-34 ms at 200 000) and hands it
here, where it is written, old checkpoints pruned and retention applied, in the order they
were taken.

A daemon thread: a write stuck on a hung share must not keep the process from exiting.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from primacy.store import messages
from primacy.store.checkpoint import Checkpoint
from primacy.store.errors import JournalError

Write = Callable[[Checkpoint, str], Path]  # (checkpoint, the segment current when taken)


class CheckpointThread:
    def __init__(self, write: Write) -> None:
        self._write = write
        self._jobs: queue.SimpleQueue[tuple[Checkpoint, str, Future[Path]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._run, name="primacy-checkpoint", daemon=True)
        self._thread.start()

    def submit(self, checkpoint: Checkpoint, current_segment: str, written: Future[Path]) -> None:
        """Write ``checkpoint`` after those submitted before; ``written`` gets its path or the
        error."""
        self._jobs.put((checkpoint, current_segment, written))

    def close(self) -> None:
        """Write what was submitted, then stop the thread and wait for it."""
        self._jobs.put(None)
        self._thread.join()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            checkpoint, current_segment, written = job
            if not written.set_running_or_notify_cancel():
                continue
            try:
                written.set_result(self._write(checkpoint, current_segment))
            except BaseException as error:  # the waiter reports it; the next one may succeed
                written.set_exception(error)


def fail_if_not_taken(job: Future[None], written: Future[Path]) -> None:
    """A checkpoint that was never taken (the segment's sync failed, the writer stopped
    first) never reaches the checkpoint thread: its waiter gets the error here."""
    error = job.exception()
    if error is not None:
        written.set_exception(error)


def log_failure(future: Future[Path]) -> None:
    """Log a failed checkpoint (waiting for it to finish first); not raised: the next one may
    succeed, and recovery without it only reads more."""
    error = future.exception()
    if error is not None and not isinstance(error, JournalError):
        messages.LOG.error("writing a checkpoint failed: %s", error)
