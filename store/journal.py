"""The journal store a master writes through: open (recover and fence), append, checkpoint, close.

Open it only after claiming an epoch: ``JournalStore.open(config, epoch=...,
fencing_check=lease.revalidate)``. Opening recovers the state, writes this
epoch's fence as the first batch of its first segment, and starts the one
writer thread that ``close()`` stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from primacy.share.layout import CHECKPOINTS_DIR_NAME
from primacy.share.safe_io import real_directory
from primacy.store import format as fmt
from primacy.store import messages, payloads
from primacy.store.checkpoint import (
    Checkpoint,
    SegmentPosition,
    prune_checkpoints,
    write_checkpoint,
)
from primacy.store.checkpoint_thread import CheckpointThread, fail_if_not_taken, log_failure
from primacy.store.config import StoreConfig
from primacy.store.errors import (
    JournalError,
    JournalWriteFailed,
    MessageTooLarge,
    StaleEpoch,
)
from primacy.store.follower import JournalFollower
from primacy.store.recovery import RecoveryResult
from primacy.store.retention import retire_segments
from primacy.store.segments import (
    check_batch_at,
    has_own_header,
    list_segments,
    open_segment,
)
from primacy.store.state import PendingMessage
from primacy.store.stats import StoreStats, store_stats
from primacy.store.takeover_read import takeover_recovery
from primacy.store.unclaimed import EpochClaimed, set_aside_unclaimed
from primacy.store.writer import GroupCommitWriter, QueuedRecord, SegmentFile

# A new master that had to read more segments than this writes a checkpoint at once.
# Zero: every takeover over an existing journal checkpoints, so each fence is kept
# twice (its batch, and the checkpoint's fence table) and takeover cost stays flat.
CHECKPOINT_AFTER_SEGMENTS_READ = 0


class JournalStore:
    """One master's journal: group-committed appends, nothing acked after a failed fencing check."""

    def __init__(self, config: StoreConfig, epoch: int, recovery: RecoveryResult) -> None:
        # Use ``open``: construction alone does not recover, fence or start the writer.
        self.config = config
        self.epoch = epoch
        self.recovery = recovery
        # The one dedupe window and pending set of this master: the recovered state itself,
        # from now on changed only by the writer thread (as batches commit) and read by
        # others (``is_duplicate``, ``stats``) under the lock. Not a copy: a copy cost a new
        # master 29 ms of its takeover and kept a second window for its whole tenure. What
        # was pending at the takeover, the broker's first queues, is taken here, before the
        # writer can change it.
        self._state = recovery.state
        self.recovered_pending: tuple[PendingMessage, ...] = tuple(
            message for queue in recovery.state.pending.values() for message in queue.values()
        )
        self.recovered_last_sequence = recovery.state.last_sequence
        # Durable topic subscriptions at the takeover: topic -> their queue names.
        self.recovered_durables = {t: tuple(q) for t, q in recovery.state.durables.items()}
        self._state_lock = threading.Lock()
        # SENDs submitted and not yet in ``_state``: a resend of one is a duplicate too.
        self._unapplied_sends: set[tuple[str, str]] = set()
        self._positions: dict[str, SegmentPosition] = {
            name: SegmentPosition(name, end, complete=True)
            for name, end in recovery.valid_ends.items()
        }
        self._records_since_checkpoint = 0
        self._segment = SegmentFile(
            config.journal_dir, epoch, config.node_id, config.segment_max_bytes
        )
        self._writer: GroupCommitWriter | None = None
        self._checkpoints: CheckpointThread | None = None
        # Called on the writer thread after each batch: (records, bytes, seconds to write,
        # sync and check). Must be quick and must not raise.
        self.commit_observer: Callable[[int, int, float], None] | None = None
        self.opened_from = "full_recovery"
        self.open_fallback: str | None = None
        self.bytes_read_at_open = recovery.report.bytes_read

    @classmethod
    def open(
        cls,
        config: StoreConfig,
        *,
        epoch: int,
        fencing_check: Callable[[], None],
        epoch_claimed: EpochClaimed | None = None,
        follower: JournalFollower | None = None,
    ) -> JournalStore:
        """Recover, fence every earlier epoch, start the writer. Call after claiming ``epoch``.

        ``epoch_claimed(E)``: whether epoch E was claimed, asked of the share's authority
        (the node passes its share port's ``epoch_exists``). With it, a segment of a later
        epoch nobody claimed is set aside instead of stopping every new master
        (``store/unclaimed.py``); without it, every later-epoch segment stops this one.
        """
        journal_dir = config.journal_dir
        journal_dir.parent.mkdir(parents=True, exist_ok=True)  # the share: the operator's path
        real_directory(journal_dir)  # never a symlink out of the share
        if epoch_claimed is not None:
            set_aside_unclaimed(journal_dir, epoch, epoch_claimed)
        # Only a segment a master wrote counts: a planted name of a later epoch, without a
        # header of its own, would otherwise keep every new master from opening (found by
        # tests/integration/test_random_planting.py). Recovery reports it as damage.
        newer = [
            s.name for s in list_segments(journal_dir) if s.epoch >= epoch and has_own_header(s)
        ]
        if newer:
            raise StaleEpoch(
                f"the journal already has segments of epoch {epoch} or later ({newer[0]}); "
                "claim a new epoch before opening the journal"
            )
        recovery, fallback, bytes_read = takeover_recovery(config, epoch, follower)
        fence = [
            payloads.FenceEntry(s.epoch, s.first_sequence, recovery.valid_ends.get(s.name, 0))
            for s in recovery.segments
        ]
        recovery.fences.add(epoch, fence)
        store = cls(config, epoch, recovery)
        store.opened_from = "full_recovery" if fallback else "followed"
        store.open_fallback, store.bytes_read_at_open = fallback, bytes_read
        store._writer = GroupCommitWriter(
            store._segment,
            config.sync_policy,
            fencing_check,
            store._on_commit,
            store.recovered_last_sequence + 1,
            config.max_batch_bytes,
            config.background_sync_interval_s,
            config.inline_commit_quiet_s,
        )
        store._checkpoints = CheckpointThread(store._write_checkpoint)
        if config.checkpoint_idle_s > 0:
            store._writer.when_idle(config.checkpoint_idle_s, store._checkpoint_when_idle)
        try:  # whatever fails, the writer is stopped again before the error goes up
            # Nothing else is queued yet, so the fence is alone in the first batch.
            record = fmt.EncodedRecord(
                fmt.RecordType.FENCE, time.time_ns(), payload=payloads.encode_fence(fence)
            )
            store._writer.submit(record, "", "", durable=True).result()
            messages.log(
                logging.INFO,
                messages.FENCE_WRITTEN,
                f"epoch {epoch} fenced {len(fence)} earlier segment(s) in {store._segment.name}",
            )
            if recovery.report.segments_read > CHECKPOINT_AFTER_SEGMENTS_READ:
                store._write_takeover_checkpoint()
        except BaseException:
            store.close()
            raise
        return store

    # ------------------------------------------------------------ appending

    def is_duplicate(self, destination: str, message_id: str) -> bool:
        """Would a SEND of this id to this destination be a resend the journal drops?

        True while the pair is in the dedupe window, its first copy is pending (not
        acknowledged), or that copy was submitted and is not yet committed: exactly what
        a master recovering this journal would decide, so resends are dropped alike
        before and after a failover.
        """
        key = (destination, message_id)
        with self._state_lock:
            return key in self._unapplied_sends or self._state.is_duplicate(*key)

    def location_of(self, destination: str, message_id: str) -> PendingMessage | None:
        """Where a committed, unacknowledged SEND lies (for ``read_message``); None otherwise."""
        with self._state_lock:
            return self._state.pending.get(destination, {}).get(message_id)

    def encode_send(
        self,
        destination: str,
        message_id: str,
        payload: bytes,
        headers: dict[str, str] | None = None,
    ) -> fmt.EncodedRecord:
        """The SEND record ``append_send`` would journal; MessageTooLarge (a sentence saying
        which limit) past the format's or ``max_message_size``.

        For a caller that must refuse an oversized message before queueing anything (the
        broker, ahead of a transaction): it checks once and submits the same record.
        """
        record = fmt.EncodedRecord(
            fmt.RecordType.SEND,
            time.time_ns(),
            _bounded(destination, fmt.MAX_DESTINATION_BYTES, "destination"),
            _bounded(message_id, fmt.MAX_MESSAGE_ID_BYTES, "message id"),
            payloads.encode_headers(headers),
            bytes(payload),
        )
        if record.encoded_len > self.config.max_message_size:
            raise MessageTooLarge(
                f"message {message_id[:100]!r} to {destination[:200]!r} takes "
                f"{record.encoded_len} bytes in the journal, more than max_message_size "
                f"({self.config.max_message_size})"
            )
        return record

    def append_send(
        self,
        destination: str,
        message_id: str,
        payload: bytes,
        headers: dict[str, str] | None = None,
    ) -> Future[int]:
        """Journal a message; the future gives its sequence once acknowledged per sync policy.

        The caller drops resends first (``is_duplicate``); a duplicate submitted anyway
        is written but not counted again (the first copy wins, as in recovery).
        """
        try:
            record = self.encode_send(destination, message_id, payload, headers)
        except MessageTooLarge as error:
            detail = f"{error}; nothing was written"
            messages.log(logging.WARNING, messages.MESSAGE_TOO_LARGE, detail)
            raise MessageTooLarge(messages.text(messages.MESSAGE_TOO_LARGE, detail)) from None
        return self.submit_send(record, destination, message_id)

    def submit_send(
        self, record: fmt.EncodedRecord, destination: str, message_id: str, *, defer: bool = False
    ) -> Future[int]:
        """``append_send`` of a record from ``encode_send`` with the same destination and id
        (``defer``: the caller calls ``commit_deferred`` soon)."""
        return self.submit_sends([(record, destination, message_id)], defer=defer)

    def submit_sends(
        self, records: list[tuple[fmt.EncodedRecord, str, str]], *, defer: bool = False
    ) -> Future[int]:
        """``submit_send`` of many, in order: one lock, one wake-up, one future (store/bulk.py)."""
        with self._state_lock:
            # Under the lock, so no commit can apply one between the submit and the add.
            submitted = self._require_writer().submit_many(records, defer=defer)
            self._unapplied_sends.update((d, m) for _, d, m in records)
        return submitted

    def append_ack(self, destination: str, message_id: str, *, defer: bool = False) -> Future[int]:
        """Journal that a consumer acknowledged the message: it is no longer pending."""
        record = fmt.EncodedRecord(
            fmt.RecordType.ACK,
            time.time_ns(),
            _bounded(destination, fmt.MAX_DESTINATION_BYTES, "destination"),
            _bounded(message_id, fmt.MAX_MESSAGE_ID_BYTES, "message id"),
        )
        return self._require_writer().submit(record, destination, message_id, defer=defer)

    def commit_deferred(self) -> bool:
        """Commit the ``defer`` submits (writer.py, ``commit_inline``); True if on this thread."""
        return self._require_writer().commit_inline()

    def end_inline_commits(self, while_one_runs: Callable[[], None]) -> bool:
        """No more ``commit_deferred`` commits on the caller's thread (writer.py,
        ``end_inline_commits``); True if one was under way, ``while_one_runs`` called."""
        writer = self._writer
        return writer is not None and writer.end_inline_commits(while_one_runs)

    def append_delivery(self, destination: str, message_id: str) -> Future[int]:
        """Journal that a message was handed to a consumer, for the replay's delivery figures.

        Not waited for by anyone: it rides in the next batch (so before any ACK of
        the delivery), and a crash may lose the last few before they are synced.
        """
        record = fmt.EncodedRecord(
            fmt.RecordType.DELIVER,
            time.time_ns(),
            _bounded(destination, fmt.MAX_DESTINATION_BYTES, "destination"),
            _bounded(message_id, fmt.MAX_MESSAGE_ID_BYTES, "message id"),
        )
        return self._require_writer().submit(record, destination, message_id)

    def append_subscription(self, topic: str, queue_name: str, *, ends: bool) -> Future[int]:
        """Journal that durable subscription ``queue_name`` of ``topic`` begins or ``ends``
        (``state.py``); synced and checked before completing under every sync policy."""
        kind = fmt.RecordType.UNSUBSCRIBE if ends else fmt.RecordType.SUBSCRIBE
        names = (_bounded(name, fmt.MAX_DESTINATION_BYTES, "name") for name in (topic, queue_name))
        record = fmt.EncodedRecord(kind, time.time_ns(), *names)
        return self._require_writer().submit(record, topic, queue_name, durable=True)

    def append_control(self, event: dict[str, Any]) -> Future[int]:
        """Journal a control event (a role change); always synced and checked before completing."""
        payload = payloads.encode_control(event)
        if len(payload) > self.config.max_message_size:
            raise MessageTooLarge("the control event is larger than max_message_size")
        record = fmt.EncodedRecord(fmt.RecordType.CONTROL, time.time_ns(), payload=payload)
        return self._require_writer().submit(record, "", "", durable=True)

    def checkpoint(self) -> Future[Path]:
        """Take a checkpoint on the writer thread between batches; write it, then apply
        retention, on the checkpoint thread. The future gets its path once it is on disk."""
        written: Future[Path] = Future()
        taken = self._require_writer().call(lambda: self._take_checkpoint(written))
        taken.add_done_callback(lambda job: fail_if_not_taken(job, written))
        return written

    def read_message(self, message: PendingMessage) -> fmt.Record:
        """Read back the full SEND record of a pending message (the broker's queue rebuild)."""
        _, _, sequence, segment, offset = message
        with open_segment(self.config.journal_dir / segment) as source:  # no symlink, no FIFO
            status, header = check_batch_at(source, offset)
            if status is not fmt.BatchStatus.OK or header is None:
                raise JournalError(f"the batch at {segment}:{offset} is {status.value}")
            data = source.read(offset, header.batch_len)
        try:
            for record in fmt.iter_records(data):
                if record.sequence == sequence:
                    return record
        except fmt.FormatError as exc:  # whole, but not written by us: its headers, say
            raise JournalError(f"the batch at {segment}:{offset} is not ours: {exc}") from None
        raise JournalError(f"sequence {sequence} is not in its batch")

    def stats(self) -> StoreStats:
        return store_stats(self)

    def add_completion_listener(self, listener: Callable[[], None]) -> None:
        """``listener()`` runs on the writer thread after each batch's futures completed (or
        failed): one call per batch, for a thread that waits on many of them."""
        self._require_writer().add_completion_listener(listener)

    def close(self) -> None:
        """Write what is queued, sync, stop the writer thread, then write the checkpoints
        taken and stop their thread. Safe to call twice."""
        if self._writer is not None:
            self._writer.close()
        if self._checkpoints is not None:
            self._checkpoints.close()

    def __enter__(self) -> JournalStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------ writer thread only

    def _require_writer(self) -> GroupCommitWriter:
        if self._writer is None:
            raise JournalError("the journal store was not opened with JournalStore.open")
        return self._writer

    def _on_commit(
        self, batch: list[QueuedRecord], segment: str, offset: int, length: int, commit_s: float
    ) -> None:
        if self.commit_observer is not None:
            self.commit_observer(len(batch), length, commit_s)
        with self._state_lock:
            for queued in batch:
                record_type = queued.record.record_type
                self._state.apply(
                    record_type,
                    queued.sequence,
                    queued.destination,
                    queued.message_id,
                    segment,
                    offset,
                )
                if record_type is fmt.RecordType.SEND:
                    self._unapplied_sends.discard((queued.destination, queued.message_id))
        self._positions[segment] = SegmentPosition(segment, offset + length, complete=False)
        for name, end in self._segment.take_sealed().items():  # rotated since the last batch
            self._positions[name] = SegmentPosition(name, end, complete=True)
        self._records_since_checkpoint += len(batch)
        if self._records_since_checkpoint >= self.config.checkpoint_interval_records:
            self._records_since_checkpoint = 0
            # Runs right after this batch's waiters are completed, not before.
            self.checkpoint().add_done_callback(log_failure)

    def _checkpoint_when_idle(self) -> None:
        """A burst is over: checkpoint, so a takeover need not replay it (it replays what
        came since the last checkpoint: up to checkpoint_interval_records, 0.3 s and more).
        Queued like the interval's checkpoint, on this thread's next turn."""
        if self._records_since_checkpoint >= self.config.checkpoint_idle_min_records:
            self.checkpoint().add_done_callback(log_failure)

    def _write_takeover_checkpoint(self) -> None:
        """Every takeover adds a segment; without this, a journal of few records over many
        epochs is never checkpointed and each takeover reads every segment. Waited for, so
        the fence is kept twice (its batch may be damaged later) before this master serves;
        one that fails stops the open, since serving with the fence kept once is the hole
        that rule closes (docs/safety.md, "A fence is kept twice before anyone relies on
        it"). Hidden behind the takeover wait where there is one; after a master whose
        process ended, it is part of the failover."""
        try:
            self.checkpoint().result()
        except OSError as exc:
            raise JournalWriteFailed(
                f"the takeover checkpoint was not written ({exc}); "
                "without it this epoch's fence would be kept once only"
            ) from exc

    def _take_checkpoint(self, written: Future[Path]) -> None:
        """On the writer thread, between batches: nothing applies records meanwhile."""
        self._records_since_checkpoint = 0
        self._segment.sync()  # the checkpoint must never cover bytes the disk does not have
        checkpoint = Checkpoint(
            self.epoch, self._state.snapshot(), dict(self._positions), self.recovery.fences
        )
        assert self._checkpoints is not None  # started with the writer
        self._checkpoints.submit(checkpoint, self._segment.name, written)

    # ------------------------------------------------------------ checkpoint thread only

    def _write_checkpoint(self, checkpoint: Checkpoint, current_segment: str) -> Path:
        directory = self.config.journal_dir / CHECKPOINTS_DIR_NAME
        path = write_checkpoint(directory, checkpoint)
        prune_checkpoints(directory, self.config.checkpoints_kept)
        messages.log(logging.INFO, messages.CHECKPOINT_WRITTEN, path.name)
        # The checkpoint's own pending counts and current segment, as when it was taken: a
        # segment without pending messages then has none later (new records go to the
        # current segment), and one that became current since is not covered as complete.
        removed = retire_segments(
            self.config,
            checkpoint.positions,
            checkpoint.state.pending_by_segment,
            current_segment=current_segment,
        )
        for segment in removed:
            # A position of a segment that is gone is never read again (recovery looks up
            # the segments it finds): kept, it would grow every checkpoint with uptime. The
            # writer thread writes positions of its current segment and of those it just
            # sealed, never of one retired here (complete when the checkpoint was taken);
            # one dict operation each, atomic under the interpreter lock.
            self._positions.pop(segment.name, None)
        return path


def _bounded(text: str, limit: int, what: str) -> bytes:
    data = text.encode()
    if len(data) > limit:
        raise MessageTooLarge(f"the {what} is {len(data)} bytes, more than the format's {limit}")
    return data
