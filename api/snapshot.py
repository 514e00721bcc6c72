"""The immutable status snapshot the supervisor publishes and the HTTP handlers read.

Every figure is a typed field, read as an attribute; ``to_json`` is ``/status``'s body
(docs/operator-guide.md, "HTTP endpoints", lists its fields and a test holds it to them).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from primacy.share.records import HolderInfo, NodeEntry, Role

# The role loop publishes a snapshot at least every 0.2 s; one this old means it is stuck.
LOOP_STALL_S = 2.0


@dataclass(frozen=True)
class ShareFinding:
    """One problem the start-up mount check found: its stable code, severity and one line."""

    code: str | None
    severity: str  # "warning" or "refused"
    summary: str


@dataclass(frozen=True)
class ShareCheck:
    """The doctor's verdict on the share's mount when the node started (``primacy run``)."""

    verdict: Literal["fine", "warnings", "refused_but_forced"]
    profile: str | None  # the profile in force; None only for a refused filesystem type
    fs_type: str | None
    mount_point: str | None
    summary: str  # the doctor's one-line verdict, led by the worst problem's code
    findings: tuple[ShareFinding, ...] = ()


@dataclass(frozen=True, slots=True)
class JournalSettings:
    """The journal settings in force (docs/operator-guide.md, "The journal's settings")."""

    segment_max_bytes: int
    max_message_size: int
    retention_max_age_s: float | None
    retention_max_bytes: int | None
    dedupe_window_messages: int


@dataclass(frozen=True, slots=True)
class JournalFigures:
    """The open journal of a node holding the lock; the ``*_records``/``batches``/``tails``
    figures were found when it opened."""

    epoch: int
    sync_policy: str
    last_sequence: int
    pending_messages: int
    records_written: int
    bytes_written: int
    batches_written: int
    current_segment: str
    fenced_records: int
    damaged_batches: int
    torn_tails: int
    failure: str | None  # why the journal stopped taking writes
    settings: JournalSettings
    # How the journal was opened: "followed" (this node's follower state, only the tail read
    # after the claim) or "full_recovery"; why not followed; the bytes read to open it.
    opened_from: str = "full_recovery"
    open_fallback: str | None = None
    bytes_read_at_open: int = 0


@dataclass(frozen=True, slots=True)
class FollowerFigures:
    """A slave's journal follower (docs/safety.md, "A hot standby"): how far it has read."""

    mode: str  # starting, following, fallen_back, handed_over
    last_sequence: int
    position_bytes: int
    lag_bytes: int
    lag_s: float
    fallbacks: int
    last_fallback: str | None


@dataclass(frozen=True, slots=True)
class BrokerFigures:
    """The serving STOMP broker's figures, as ``BrokerService.stats`` counts them."""

    running: bool
    failure: str | None
    connections_open: int
    connections_total: int
    messages_in: int
    messages_out: int
    messages_acked: int
    redeliveries: int
    duplicates_dropped: int
    errors_sent: int
    connections_refused: int
    subscriptions_refused: int
    transactions_refused: int
    dead_lettered: int
    messages_expired: int
    temp_queues: int
    temp_queue_sends_dropped: int
    durable_subscriptions: int
    durable_messages_held: int
    durable_oldest_age_s: float
    topic_messages_dropped: int
    stomp_auth: Literal["users-file", "none"]
    logins_ok: int
    logins_failed: int
    unauthorized: int
    tls: bool
    tls_handshakes_failed: int
    sends_held: int
    sends_refused_full: int
    sends_waiting: int
    messages_unacknowledged: int
    destinations: int
    body_memory_bytes: int
    messages_ready: int
    journal_wakeups: int


@dataclass(frozen=True)
class ClusterMember(NodeEntry):
    """One node of the share's registry as this node last read it (``/cluster``): its entry,
    and whether it was refreshed lately."""

    live: bool


# The snapshot's fields only the node itself uses: not part of ``/status``.
_INTERNAL = ("master_claim_expires_monotonic", "built_at_monotonic", "lock_io_overdue_monotonic")


@dataclass(frozen=True)
class StatusSnapshot:
    """One consistent view of a node. Monotonic times use ``time.monotonic`` of this process."""

    node: str
    role: str
    epoch: int | None
    since_unix_s: float
    priority: str
    master_claim_expires_monotonic: float = float("-inf")
    built_at_monotonic: float = field(default_factory=time.monotonic)
    lock_io_overdue_monotonic: float = float("inf")
    last_keepalive_unix_s: float | None = None
    last_keepalive_duration_s: float | None = None
    lock_holder: HolderInfo | None = None
    first_lock_attempt_done: bool = False
    lock_attempt_error: str | None = None  # the last lock attempt failed with this error
    waiting_for: str | None = None  # a master's exec child not ready yet: what it waits for
    version: str = ""
    share: str = ""
    share_check: ShareCheck | None = None
    journal: JournalFigures | None = None  # None unless this node has the journal open
    paused: bool = False
    # The node's lock_keep_alive_period_ms, in seconds: what the lease-check alert's
    # threshold follows (monitoring/alerts.yml, PrimacySlowLeaseChecks).
    lock_keep_alive_period_s: float = 0.0
    held_off_s: float = 0.0  # after a failed start or a crash loop: left before the next try
    broker: BrokerFigures | None = None  # None unless this node serves
    # Who may connect to the STOMP connector: "none" checks nobody (docs/security); None
    # without a STOMP connector.
    stomp_auth: Literal["users-file", "none"] | None = None
    cluster: tuple[ClusterMember, ...] = ()
    # Who decides the master: "share" (its lock file and epochs/) or "zookeeper"; and the
    # ZooKeeper session's state (connecting, connected, suspended, lost), None on the share.
    coordination: str = "share"
    coordination_session: str | None = None
    # This node's last claim was refused because the coordinator's epoch counter is below
    # an epoch the share's journal shows was served (logged with its code): until it agrees, no
    # claim; cleared by a claim of this node or the sight of another's.
    coordinator_behind_share: bool = False
    # Why this node's last claim was refused: a path on the share its user cannot use (owner or
    # mode), with the node's code, the path and the fix; None once a lock attempt
    # finds the share usable (docs/runbook.md, "PrimacyShareUnusable").
    share_unusable: str | None = None
    # The journal follower of this node (None if it follows none: journal_follow_interval_ms 0,
    # priority never).
    follower: FollowerFigures | None = None

    def is_serving_master(self, now_monotonic: float | None = None) -> bool:
        """A master claims the role only while its last lease check is under one keepalive old."""
        now = time.monotonic() if now_monotonic is None else now_monotonic
        return (
            self.role == Role.MASTER
            and self.waiting_for is None
            and now < self.master_claim_expires_monotonic
        )

    def is_eligible_standby(self) -> bool:
        """A healthy slave that would take over if the master went: it may serve (priority
        not ``never``), is not held off after a failed start, and may claim an epoch."""
        return (
            self.is_healthy_slave()
            and self.first_lock_attempt_done
            and self.priority != "never"
            and self.held_off_s == 0
            and not self.coordinator_behind_share
        )

    def is_healthy_slave(self) -> bool:
        """A slave whose last lock attempt reached the share (found the lock busy)."""
        return self.role == Role.SLAVE and self.lock_attempt_error is None

    def is_live(self, now_monotonic: float | None = None) -> bool:
        """False once the role loop stalls or a lock operation overruns its deadline."""
        now = time.monotonic() if now_monotonic is None else now_monotonic
        return now < self.built_at_monotonic + LOOP_STALL_S and now < self.lock_io_overdue_monotonic

    def is_ready(self) -> bool:
        """The node has tried the lock once and, if it holds it, has recovered the journal and
        its exec child is ready."""
        return (
            self.first_lock_attempt_done
            and self.role in (Role.SLAVE, Role.MASTER)
            and self.waiting_for is None
        )

    def to_json(self) -> dict[str, Any]:
        """``/status``'s body: every field but the internal ones, plus ``since`` (ISO 8601),
        ``live`` and ``serving``."""
        data = asdict(self)
        for internal in _INTERNAL:
            data.pop(internal)
        data["since"] = datetime.fromtimestamp(self.since_unix_s, UTC).isoformat(
            timespec="milliseconds"
        )
        data["live"] = self.is_live()
        data["serving"] = self.is_serving_master()
        data["eligible_standby"] = self.is_eligible_standby()
        return data
