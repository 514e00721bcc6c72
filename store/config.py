"""The journal's settings, validated once, and its sync policies.

``JournalKeys`` are the settings an operator sets (keys of the node's config file and
flags of ``primacy run``, which the node's configuration inherits as they are);
``StoreConfig`` adds what the node decides itself: where, who, and the internal sizes.
"""

from __future__ import annotations

import enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from primacy.share.layout import ShareLayout
from primacy.store.config_keys import Float, Int, key

MIB = 1024 * 1024
# A batch must stay below 2 GiB (docs/journal-format.md) and hold one whole message.
MAX_MESSAGE_SIZE_LIMIT = 1024 * MIB
# A segment's offsets are u64, but one file past this is no journal segment anyone wants.
MAX_SEGMENT_BYTES = 64 * 1024 * MIB
# A batch holds one message of max_message_size plus at least this much (its header and more).
BATCH_OVERHEAD_BYTES = 4096
DEFAULT_MAX_BATCH_BYTES = 16 * MIB
# Written for "no limit" in the TOML file or on the command line, for these keys.
NO_LIMIT = "none"
NO_LIMIT_KEYS = ("retention_max_age_s", "retention_max_bytes")


class SyncPolicy(enum.StrEnum):
    """When a write reaches the disk, relative to its acknowledgement (docs/journal-format.md)."""

    SYNC = "sync"  # fdatasync, then fencing check, then acknowledge
    WRITE_NO_SYNC = "write_no_sync"  # write, fencing check, acknowledge; fdatasync later
    NO_SYNC = "no_sync"  # acknowledge at once; write, check and fdatasync later


class JournalKeys(BaseModel):
    """The journal's settings an operator sets; each is declared here and nowhere else."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sync_policy: SyncPolicy = key(
        SyncPolicy.SYNC,
        "when a journal write is acknowledged: sync (after fdatasync and the fencing check), "
        "write_no_sync, no_sync (see docs/journal-format.md for what each survives)",
    )
    segment_max_bytes: Int = key(
        64 * MIB,
        "start a new journal segment when the next batch would take the current one past this size",
        metavar="BYTES",
        ge=4096,
        le=MAX_SEGMENT_BYTES,
    )
    max_message_size: Int = key(
        5 * MIB,
        "refuse a message whose journal record (about 40 bytes + destination + id + headers "
        "+ body) is larger",
        metavar="BYTES",
        ge=1,
        le=MAX_MESSAGE_SIZE_LIMIT,
    )
    retention_max_age_s: Float | None = key(
        7 * 24 * 3600.0,
        'delete sealed journal segments older than this once nothing in them is pending ("none": '
        "no age limit)",
        metavar="S|none",
        ge=0,
        le=100 * 365 * 86_400,
    )
    retention_max_bytes: Int | None = key(
        None,
        "delete the oldest sealed journal segments while the journal is larger, never one still "
        'holding a pending message ("none": no size limit)',
        metavar="BYTES|none",
        ge=0,
        le=2**62,
    )
    dedupe_window_messages: Int = key(
        100_000,
        "a resend is dropped if its (destination, message id) is among the last N the journal "
        "accepted",
        metavar="N",
        ge=0,
        le=10_000_000,
    )

    @field_validator(*NO_LIMIT_KEYS, mode="before")
    @classmethod
    def _none_means_no_limit(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() == NO_LIMIT:
            return None
        return value


class StoreConfig(JournalKeys):
    """Everything the journal store needs to know about where and how to write."""

    share: Path
    node_id: str
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    background_sync_interval_s: float = 0.05
    checkpoint_interval_records: int = 200_000
    # After a burst: a checkpoint once the writer has been idle this long, if at least
    # checkpoint_idle_min_records came since the last one, so a takeover right after a busy
    # spell replays a short tail (0: never).
    checkpoint_idle_s: float = 1.0
    checkpoint_idle_min_records: int = 10_000
    checkpoints_kept: int = Field(default=2, ge=1)
    # A lone record may be committed on the submitting thread (the broker's loop) when the
    # writer is idle and no batch of two or more was committed for this long: no hand-off
    # either way for one producer (store/writer.py, ``commit_inline``). None: never. On a hung
    # share the loop then hangs in the commit; a demotion shuts its connections down from
    # the stopping thread (broker/service.py, ``stop``). docs/benchmarks.md, "The message
    # path (issue 49)", measures what it gives one producer.
    inline_commit_quiet_s: float | None = 0.5

    @model_validator(mode="after")
    def _a_batch_holds_one_message(self) -> StoreConfig:
        if self.max_batch_bytes < self.max_message_size + BATCH_OVERHEAD_BYTES:
            raise ValueError("max_batch_bytes must leave room for one message of max_message_size")
        return self

    @property
    def journal_dir(self) -> Path:
        return ShareLayout(Path(self.share)).journal
