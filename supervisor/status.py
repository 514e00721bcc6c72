"""Figures the node publishes about its journal and the settings it derives for its broker."""

from __future__ import annotations

from typing import Any

from primacy.broker.config import BrokerConfig
from primacy.broker.frames import FrameLimits
from primacy.store.journal import JournalStore


def journal_figures(store: JournalStore | None) -> dict[str, Any] | None:
    """The journal part of ``/status`` (None unless this node has the journal open)."""
    if store is None:
        return None
    stats = store.stats()
    return {
        "epoch": stats.epoch,
        "sync_policy": str(stats.sync_policy),
        "last_sequence": stats.last_sequence,
        "pending_messages": stats.pending_messages,
        "records_written": stats.records_written,
        "bytes_written": stats.bytes_written,
        "batches_written": stats.batches_written,
        "current_segment": stats.current_segment,
        "fenced_records": stats.fenced_records_at_open,
        "damaged_batches": stats.damaged_batches_at_open,
        "torn_tails": stats.torn_tails_at_open,
        "failure": stats.failure,
        "settings": {
            "segment_max_bytes": store.config.segment_max_bytes,
            "max_message_size": store.config.max_message_size,
            "retention_max_age_s": store.config.retention_max_age_s,
            "retention_max_bytes": store.config.retention_max_bytes,
            "dedupe_window_messages": store.config.dedupe_window_messages,
        },
    }


def broker_config(store: JournalStore) -> BrokerConfig:
    """Frames big enough for the largest message the journal takes, plus a full header section."""
    default = FrameLimits()
    largest = store.config.max_message_size + default.max_header_bytes
    return BrokerConfig(
        frame_limits=FrameLimits(max_frame_bytes=max(default.max_frame_bytes, largest))
    )
