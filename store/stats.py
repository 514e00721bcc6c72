"""What a master's journal reports of itself: the figures behind ``/status`` and the metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from primacy.store.config import SyncPolicy

if TYPE_CHECKING:
    from primacy.store.journal import JournalStore


@dataclass(frozen=True)
class StoreStats:
    """Figures for the status endpoint and metrics."""

    epoch: int
    sync_policy: SyncPolicy
    last_sequence: int
    pending_messages: int
    batches_written: int
    records_written: int
    bytes_written: int
    current_segment: str
    fenced_records_at_open: int
    damaged_batches_at_open: int
    torn_tails_at_open: int
    failure: str | None
    # "followed" (a follower's state, only the tail read) or "full_recovery"; and why not
    opened_from: str = "full_recovery"
    open_fallback: str | None = None
    bytes_read_at_open: int = 0


def store_stats(store: JournalStore) -> StoreStats:
    """The figures of ``store`` now (under its state lock for the state's)."""
    writer = store._writer
    report = store.recovery.report
    with store._state_lock:
        last_sequence, pending = store._state.last_sequence, store._state.pending_count()
    return StoreStats(
        epoch=store.epoch,
        sync_policy=store.config.sync_policy,
        last_sequence=last_sequence,
        pending_messages=pending,
        batches_written=writer.batches_written if writer else 0,
        records_written=writer.records_written if writer else 0,
        bytes_written=writer.bytes_written if writer else 0,
        current_segment=store._segment.name,
        fenced_records_at_open=report.fenced_records,
        damaged_batches_at_open=len(report.damaged),
        torn_tails_at_open=len(report.torn_tails),
        failure=str(writer.failure) if writer and writer.failure else None,
        opened_from=store.opened_from,
        open_fallback=store.open_fallback,
        bytes_read_at_open=store.bytes_read_at_open,
    )
