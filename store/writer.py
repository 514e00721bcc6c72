"""Group commit: one writer thread turns everything queued into one batch, one write, one check.

For each batch: encode, one ``os.write`` of the whole batch, fdatasync if the
policy asks, then the fencing check (which therefore starts after the write
returned), then the commit hook, then every waiter is completed, then the
completion listeners are told once. If the check or the write fails, no waiter
of that batch or behind it is acknowledged and the writer stops for good.

A lone record may be committed on the submitting thread instead (``commit_inline``):
the same ``_commit``, so the same order (the waiter completes only after the sync
and the fencing check), without the two thread wake-ups of a hand-off. Only one
side commits at a time (``_busy``); the writer thread keeps every batch of two or
more, and every record once it has committed a group lately (concurrency).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from primacy.store import format as fmt
from primacy.store import messages
from primacy.store.config import SyncPolicy
from primacy.store.errors import JournalClosed, JournalError, JournalFenced, JournalWriteFailed
from primacy.store.segment_file import SegmentFile

__all__ = ["GroupCommitWriter", "QueuedRecord", "SegmentFile"]  # SegmentFile: where it was

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueuedRecord:
    """One record waiting for the writer, with the sequence it was given on submit."""

    sequence: int
    record: fmt.EncodedRecord
    destination: str
    message_id: str
    future: Future[int]
    durable: bool  # sync and check before completing, whatever the policy


Job = tuple[Callable[[], Any], Future[Any]]

# The future of every record of a ``submit_many`` but its last: done, so nobody completes it.
_NO_WAITER: Future[int] = Future()
_NO_WAITER.set_result(0)
CommitHook = Callable[[list[QueuedRecord], str, int, int, float], None]


class GroupCommitWriter:
    """Owns the writer thread; ``close()`` drains the queue and joins it."""

    def __init__(
        self,
        segment: SegmentFile,
        policy: SyncPolicy,
        fencing_check: Callable[[], None],
        on_commit: CommitHook,
        next_sequence: int,
        max_batch_bytes: int,
        background_sync_interval_s: float,
        inline_quiet_s: float | None = None,
    ) -> None:
        self.segment = segment
        self.policy = policy
        self.fencing_check = fencing_check
        self.on_commit = on_commit
        self.max_batch_bytes = max_batch_bytes
        self.background_sync_interval_s = background_sync_interval_s
        # ``commit_inline`` commits a lone record on the caller's thread only when no batch of
        # two or more records was committed for this long (None: never).
        self.inline_quiet_s = inline_quiet_s
        self.next_sequence = next_sequence
        self.failure: JournalError | None = None
        self.batches_written = 0
        self.records_written = 0
        self.bytes_written = 0
        # Batches committed (or tried, if the write or check failed) by ``commit_inline``.
        self.inline_commits = 0
        self._inline_running = False  # a caller is inside ``commit_inline``'s commit
        # Told on this thread after each burst of completed (or failed) waiters: who hands
        # them to another thread can wake it once per batch, not once per record.
        self._completion_listeners: tuple[Callable[[], None], ...] = ()
        self._queue: deque[QueuedRecord] = deque()
        self._jobs: deque[Job] = deque()
        self._closing = False
        self._dirty = False
        # A job run once the writer has been idle for a while after a commit (``when_idle``).
        self._idle_job: Callable[[], None] | None = None
        self._idle_after_s = 0.0
        self._idle_due: float | None = None  # monotonic time; None: no commit since the last
        self._last_sync_s = time.monotonic()
        self._last_group_s = -float("inf")  # monotonic time of the last batch of 2+ records
        # Someone (the writer thread, or a caller in ``commit_inline``) uses the segment. The
        # writer holds it through its jobs too: a checkpoint reads the state while it writes,
        # so no inline commit may apply records meanwhile.
        self._busy = False
        self._condition = threading.Condition()
        self._writer_thread = threading.Thread(
            target=self._run, name="primacy-journal-writer", daemon=True
        )
        self._writer_thread.start()

    def submit(
        self,
        record: fmt.EncodedRecord,
        destination: str,
        message_id: str,
        *,
        durable: bool = False,
        defer: bool = False,
    ) -> Future[int]:
        """Queue one record; the future gives its sequence once acknowledged per policy.

        ``defer``: do not wake the writer thread; the caller calls ``flush`` or
        ``commit_inline`` soon (until then the record waits for whatever wakes the writer)."""
        future: Future[int] = Future()
        with self._condition:
            self._raise_if_stopped()
            sequence = self.next_sequence
            self.next_sequence += 1
            queued = QueuedRecord(sequence, record, destination, message_id, future, durable)
            if self.policy is SyncPolicy.NO_SYNC and not durable:
                # NO_SYNC acknowledges before writing (see the docs); done before the
                # writer can see the record, so only one side ever completes it.
                future.set_result(sequence)
            self._queue.append(queued)
            if not defer:
                self._condition.notify()
        return future

    def submit_many(
        self, records: list[tuple[fmt.EncodedRecord, str, str]], *, defer: bool = False
    ) -> Future[int]:
        """Queue records in order, under one lock and one wake-up; one future for all of them,
        which gives the last one's sequence once every one is acknowledged per policy
        (records commit in order, and a failure fails every record behind it)."""
        future: Future[int] = Future()
        if not records:
            future.set_result(self.next_sequence - 1)
            return future
        with self._condition:
            self._raise_if_stopped()
            first = self.next_sequence
            self.next_sequence += len(records)
            last = len(records) - 1
            self._queue.extend(
                QueuedRecord(
                    first + n,
                    record,
                    destination,
                    message_id,
                    future if n == last else _NO_WAITER,
                    False,
                )
                for n, (record, destination, message_id) in enumerate(records)
            )
            if self.policy is SyncPolicy.NO_SYNC:
                future.set_result(first + last)  # as ``submit`` does, before the writer sees it
            if not defer:
                self._condition.notify()
        return future

    def flush(self) -> None:
        """Wake the writer thread for records submitted with ``defer``."""
        with self._condition:
            self._condition.notify()

    def commit_inline(self) -> bool:
        """Commit the one queued record on this thread if the writer is idle, no job waits and
        no group was committed within ``inline_quiet_s``; else wake the writer. True if it
        committed here (the record's future is then done, with its sequence or the failure).

        The same ``_commit`` as the writer thread's: written, synced (per policy), fencing
        checked, applied, and only then the future completed. This thread blocks meanwhile.
        """
        with self._condition:
            inline = (
                self.inline_quiet_s is not None
                and len(self._queue) == 1
                and not self._busy
                and not self._jobs
                and not self._closing
                and self.failure is None
                and (self.policy is not SyncPolicy.NO_SYNC or self._queue[0].durable)
                and time.monotonic() - self._last_group_s >= self.inline_quiet_s
            )
            if not inline:
                self._condition.notify()
                return False
            self._busy = self._inline_running = True
            batch = [self._queue.popleft()]
        self.inline_commits += 1
        try:
            self._commit(batch)
        finally:
            with self._condition:
                self._busy = self._inline_running = False
                # The writer may wait for the segment, or must rethink its idle wait (a
                # background sync or the idle job may now be due).
                self._condition.notify()
        return True

    @property
    def busy(self) -> bool:
        """The segment is in use: the writer thread is in a step (a batch, a sync, jobs) or a
        caller is in ``commit_inline``. A lone record submitted meanwhile is handed off. The
        writer thread stays busy a moment after it completed a batch's futures."""
        return self._busy

    def end_inline_commits(self, while_one_runs: Callable[[], None]) -> bool:
        """No ``commit_inline`` commits from now on. If one is under way on another thread
        (in the write, the sync or the fencing check, any of which hangs on a hung share),
        call ``while_one_runs()`` before that thread can leave ``commit_inline``, and return
        True: its caller does nothing else meanwhile (for the broker's loop: it closes no
        socket, so none of its descriptors is reused under ``while_one_runs``). It must be
        quick and must not block."""
        with self._condition:
            self.inline_quiet_s = None
            if not self._inline_running:
                return False
            while_one_runs()
            return True

    def add_completion_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` on the writer thread after each batch's waiters are completed,
        and after waiters are failed. It must be quick and must not raise."""
        with self._condition:
            self._completion_listeners = (*self._completion_listeners, listener)

    def when_idle(self, after_s: float, job: Callable[[], None]) -> None:
        """Run ``job`` on the writer thread once no record has come for ``after_s`` since the
        last commit (again after the next commit). Set before records are submitted; the job
        must not raise."""
        self._idle_after_s, self._idle_job = after_s, job

    def call(self, job: Callable[[], Any]) -> Future[Any]:
        """Run ``job`` on the writer thread between batches (checkpoints, retention)."""
        future: Future[Any] = Future()
        with self._condition:
            self._raise_if_stopped()
            self._jobs.append((job, future))
            self._condition.notify()
        return future

    def close(self) -> None:
        """Write what is queued, sync, stop the thread and wait for it."""
        with self._condition:
            self._closing = True
            self._condition.notify()
        self._writer_thread.join()

    def _raise_if_stopped(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self._closing:
            raise JournalClosed("the journal is closed; no more writes are accepted")

    def _run(self) -> None:
        try:
            while self._step():
                pass
            if self.failure is None:
                self.segment.close()
        except BaseException as exc:  # never leave waiters hanging, whatever happened
            self._fail(JournalWriteFailed(f"the journal writer stopped unexpectedly: {exc!r}"))
        finally:
            if self.segment.fd is not None:
                fd, self.segment.fd = self.segment.fd, None
                try:
                    os.close(fd)
                except OSError:
                    pass  # the descriptor is released whatever close says; the failure is known

    def _step(self) -> bool:
        """Commit one batch and run pending jobs; False once closed and drained."""
        with self._condition:
            while self.failure is None and (
                self._busy or (not self._queue and not self._jobs and not self._closing)
            ):
                wait_s = None if self._busy else self._idle_wait_s()
                if wait_s is None:
                    self._condition.wait()
                elif (wait_s <= 0 or not self._condition.wait(wait_s)) and not self._busy:
                    break
            batch = self._take_batch()
            jobs = list(self._jobs)
            self._jobs.clear()
            stop = self._closing and not self._queue and not self._jobs and not batch
            self._busy = True
        try:
            return self._work(batch, jobs, stop)
        finally:
            with self._condition:
                self._busy = False

    def _work(self, batch: list[QueuedRecord], jobs: list[Job], stop: bool) -> bool:
        """The writer thread's share of one step, holding the segment (``_busy``)."""
        if batch and not self._commit(batch):
            return False
        if self._dirty and time.monotonic() - self._last_sync_s >= self.background_sync_interval_s:
            self._sync_or_fail()
        for job, future in jobs:
            try:
                future.set_result(job())
            except Exception as exc:
                future.set_exception(exc)
        due = self._idle_due  # set by a commit, and only when there is an idle job
        quiet = not batch and not self._closing and self.failure is None
        if due is not None and quiet and time.monotonic() >= due:
            self._idle_due = None
            assert self._idle_job is not None
            self._idle_job()
        return not stop and self.failure is None

    def _idle_wait_s(self) -> float | None:
        """How long an idle writer may sleep: until a background sync or the idle job is
        due; None for as long as nothing arrives."""
        waits = [self.background_sync_interval_s] if self._dirty else []
        if self._idle_due is not None:
            waits.append(self._idle_due - time.monotonic())
        return min(waits) if waits else None

    def _take_batch(self) -> list[QueuedRecord]:
        batch: list[QueuedRecord] = []
        size = fmt.BATCH_HEADER_LEN
        while self._queue and (
            not batch or size + self._queue[0].record.encoded_len <= self.max_batch_bytes
        ):
            queued = self._queue.popleft()
            size += queued.record.encoded_len
            batch.append(queued)
        return batch

    def _commit(self, batch: list[QueuedRecord]) -> bool:
        first = batch[0].sequence
        started_s = time.monotonic()
        try:
            data = fmt.encode_batch(
                self.segment.epoch, first, time.time_ns(), [q.record for q in batch]
            )
            offset = self.segment.write(data, first)
            if self.policy is SyncPolicy.SYNC or any(q.durable for q in batch):
                self.segment.sync()
                self._last_sync_s = time.monotonic()
            else:
                self._dirty = True
        except OSError as exc:
            self._fail(JournalWriteFailed(f"writing the journal failed: {exc}"), batch)
            messages.log(logging.CRITICAL, messages.JOURNAL_WRITE_FAILED, str(exc))
            return False
        try:
            self.fencing_check()  # starts only now, after the write (and sync) returned
        except Exception as exc:
            detail = f"after writing sequences {first}..{batch[-1].sequence}: {exc}"
            messages.log(logging.CRITICAL, messages.FENCING_CHECK_FAILED, detail)
            self._fail(JournalFenced(f"this node lost mastership of the journal ({exc})"), batch)
            return False
        self.batches_written += 1
        if len(batch) > 1:
            self._last_group_s = time.monotonic()
        if self._idle_job is not None:
            self._idle_due = time.monotonic() + self._idle_after_s
        self.records_written += len(batch)
        self.bytes_written += len(data)
        self.on_commit(batch, self.segment.name, offset, len(data), time.monotonic() - started_s)
        for queued in batch:
            # A bulk submit's records but its last share one done future: skipped without
            # ``done()``, which takes the future's lock (2 us a record at 64 appenders).
            if queued.future is not _NO_WAITER and not queued.future.done():
                queued.future.set_result(queued.sequence)
        self._tell_completion_listeners()
        return True

    def _tell_completion_listeners(self) -> None:
        for listener in self._completion_listeners:
            try:
                listener()
            except Exception:  # a listener's bug must not stop the journal
                log.exception("a journal completion listener failed")

    def _sync_or_fail(self) -> None:
        try:
            self.segment.sync()
            self._dirty = False
            self._last_sync_s = time.monotonic()
        except OSError as exc:
            messages.log(logging.CRITICAL, messages.JOURNAL_WRITE_FAILED, f"fdatasync: {exc}")
            self._fail(JournalWriteFailed(f"syncing the journal failed: {exc}"))

    def _fail(self, error: JournalError, batch: list[QueuedRecord] | None = None) -> None:
        """Stop for good: fail this batch, everything queued, and every later submit."""
        with self._condition:
            if self.failure is None:
                self.failure = error
            waiting = list(batch or []) + list(self._queue)
            jobs = list(self._jobs)
            self._queue.clear()
            self._jobs.clear()
        for queued in waiting:
            if not queued.future.done():
                queued.future.set_exception(error)
        for _, future in jobs:
            future.set_exception(error)
        self._tell_completion_listeners()
        with self._condition:
            self._condition.notify()  # an idle writer thread sees the failure and ends
