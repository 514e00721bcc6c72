"""What a master's journal reports of itself: the figures behind ``/status`` and the metrics."""

from __future__ import annotations

from dataclasses import dataclass

from primacy.store.config import SyncPolicy


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
