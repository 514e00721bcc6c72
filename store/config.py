"""The journal's settings, validated once, and its sync policies."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from primacy.share.layout import ShareLayout

MIB = 1024 * 1024


class SyncPolicy(enum.StrEnum):
    """When a write reaches the disk, relative to its acknowledgement (docs/journal-format.md)."""

    SYNC = "sync"  # fdatasync, then fencing check, then acknowledge
    WRITE_NO_SYNC = "write_no_sync"  # write, fencing check, acknowledge; fdatasync later
    NO_SYNC = "no_sync"  # acknowledge at once; write, check and fdatasync later


@dataclass(frozen=True)
class StoreConfig:
    """Everything the journal store needs to know about where and how to write."""

    share: Path
    node_id: str
    sync_policy: SyncPolicy = SyncPolicy.SYNC
    segment_max_bytes: int = 64 * MIB
    max_message_size: int = 5 * MIB
    max_batch_bytes: int = 16 * MIB
    background_sync_interval_s: float = 0.05
    checkpoint_interval_records: int = 200_000
    checkpoints_kept: int = 2
    retention_max_age_s: float | None = 7 * 24 * 3600.0
    retention_max_bytes: int | None = None
    dedupe_window_messages: int = 100_000

    def __post_init__(self) -> None:
        if self.max_message_size <= 0:
            raise ValueError("max_message_size must be a positive number of bytes")
        if self.max_batch_bytes < self.max_message_size + 4096:
            raise ValueError("max_batch_bytes must leave room for one message of max_message_size")
        if self.segment_max_bytes < 4096:
            raise ValueError("segment_max_bytes must be at least 4096 bytes")
        if self.checkpoints_kept < 1:
            raise ValueError("checkpoints_kept must be at least 1")
        if self.dedupe_window_messages < 0:
            raise ValueError("dedupe_window_messages must not be negative")

    @property
    def journal_dir(self) -> Path:
        return ShareLayout(Path(self.share)).journal
