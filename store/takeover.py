"""A new master's takeover checkpoint, written beside its first clients instead of before them.

A new master's fence must be kept twice before anyone relies on it: once in its
first batch, once in a checkpoint's fence table (docs/safety.md, "A fence is kept
twice before anyone relies on it"). What relies on it is a promise to a client:
a RECEIPT for a SEND, an ACK or a resend, each of which waits for a journal future.
So the checkpoint need not be written before the node serves, only before any
such future completes: ``gate`` holds a future until the checkpoint is durable.

The checkpoint is what recovery found (the recovered state, the valid end of
every earlier segment, the fence table with this epoch's fence), which nobody
changes after ``JournalStore.open``: it is written on a thread of its own while
the writer thread commits the tenure record and the node starts serving, instead
of on the writer thread, where it held the tenure record, and so serving, back
by its whole write (about 60 ms with a full dedupe window of 100 000 ids).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from primacy.store import messages
from primacy.store.checkpoint import Checkpoint, complete_positions
from primacy.store.errors import JournalWriteFailed
from primacy.store.recovery import RecoveryResult


def recovered_checkpoint(epoch: int, recovery: RecoveryResult) -> Checkpoint:
    """What recovery found, with ``epoch``'s fence in the fence table. Nothing changes it
    once the store is open (the writer applies commits to a copy of the state), so it can
    be written on a thread of its own."""
    positions = complete_positions(recovery.valid_ends)
    return Checkpoint(epoch, recovery.state, positions, recovery.fences)


class TakeoverCheckpoint:
    """Writes one checkpoint on a thread of its own; ``gate`` holds futures until it is durable.

    ``write`` writes the checkpoint and returns its path; if it raises, every held
    future fails, since nothing may be promised without the checkpoint. ``then`` runs
    on the same thread once the held futures are completed, and must not raise: the
    writer's completion listeners, so that a thread waiting on many futures wakes for
    these too (this thread completed them, not a batch).
    """

    def __init__(self, write: Callable[[], Path], then: Callable[[], None]) -> None:
        self.written: Future[Path] = Future()
        self._write = write
        self._then = then
        self._thread = threading.Thread(
            target=self._run, name="primacy-takeover-checkpoint", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            path = self._write()
        except BaseException as exc:
            messages.LOG.critical(
                "the takeover checkpoint was not written (%s): nothing is acknowledged "
                "without it; this master's journal stops",
                exc,
            )
            self.written.set_exception(
                JournalWriteFailed(f"the takeover checkpoint was not written: {exc}")
            )
        else:
            messages.log(logging.INFO, messages.CHECKPOINT_WRITTEN, f"{path.name} (takeover)")
            self.written.set_result(path)
        self._then()

    def gate(self, future: Future[int]) -> Future[int]:
        """``future``, completed only once the checkpoint is durable too (failed if it failed)."""
        if self.written.done() and self.written.exception() is None:
            return future
        gated: Future[int] = Future()
        lock = threading.Lock()

        def settle(_: object) -> None:
            if not (future.done() and self.written.done()):
                return
            with lock:  # the two callbacks may run at once, on two threads
                if gated.done():
                    return
                failure = self.written.exception()
                if failure is not None:
                    gated.set_exception(failure)
                elif future.cancelled():
                    gated.cancel()
                elif (error := future.exception()) is not None:
                    gated.set_exception(error)
                else:
                    gated.set_result(future.result())

        future.add_done_callback(settle)
        self.written.add_done_callback(settle)
        return gated

    def wait(self) -> None:
        """Until the thread is done (the writer's checkpoints and ``close`` wait for it)."""
        self._thread.join()
