"""The node's state besides its role machine, and the status snapshot built from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from primacy.api.snapshot import (
    BrokerFigures,
    ClusterMember,
    FollowerFigures,
    JournalFigures,
    JournalSettings,
    ShareCheck,
    StatusSnapshot,
)
from primacy.share.records import HolderInfo
from primacy.store.follower import FollowerStatus
from primacy.store.journal import JournalStore
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.machine.roles import RoleMachine


@dataclass
class NodeState:
    """What the node knows besides its role: written on the role loop only (``Node``)."""

    since_unix_s: float
    first_lock_attempt_done: bool = False
    last_keepalive: tuple[float, float] | None = None  # (unix time, duration s)
    holder: HolderInfo | None = None
    # Why the last lock attempt failed with an error (not "busy"): such a slave cannot
    # reach the share, so it is no healthy standby (``/slave`` 503).
    lock_attempt_error: str | None = None
    store: JournalStore | None = None
    broker: BrokerFigures | None = None
    cluster: tuple[ClusterMember, ...] = ()
    # The coordination service's session as its client last said (None on the share).
    coordination_session: str | None = None
    # The epoch the share shows served that the coordinator did not confirm at this node's
    # last claim (refused), until a claim past it is seen; None otherwise.
    behind_share_floor: int | None = None
    # Why this node claims nothing: a path on the share its user cannot use (share/access.py);
    # set by a refused claim, cleared by a lock attempt that finds the share usable.
    share_unusable: str | None = None

    def saw_registry(
        self, cluster: tuple[ClusterMember, ...], broker_stats: dict[str, Any] | None
    ) -> None:
        """The registry thread's read: the node registry, and the serving broker's figures."""
        self.cluster = cluster
        self.broker = broker_figures(broker_stats)


def build_snapshot(
    config: NodeConfig,
    machine: RoleMachine,
    state: NodeState,
    now: float,
    version: str,
    share_check: ShareCheck | None,
    waiting_for: str | None = None,
    follower: FollowerStatus | None = None,
) -> StatusSnapshot:
    """The immutable view the role loop publishes; ``now`` is the loop's clock."""
    keepalive = state.last_keepalive
    return StatusSnapshot(
        node=config.node_id,
        role=str(machine.role),
        epoch=machine.epoch,
        since_unix_s=state.since_unix_s,
        priority=machine.priority.name.lower(),
        master_claim_expires_monotonic=machine.claim_expires_at(),
        lock_io_overdue_monotonic=_lock_io_overdue_at(machine),
        last_keepalive_unix_s=keepalive[0] if keepalive else None,
        last_keepalive_duration_s=keepalive[1] if keepalive else None,
        lock_holder=state.holder,
        first_lock_attempt_done=state.first_lock_attempt_done,
        lock_attempt_error=state.lock_attempt_error,
        waiting_for=waiting_for,
        version=version,
        share=str(config.share),
        share_check=share_check,
        journal=journal_figures(state.store),
        paused=machine.paused,
        lock_keep_alive_period_s=machine.timings.lock_keep_alive_period_s,
        held_off_s=round(max(0.0, machine.hold_off_until - now), 3),
        broker=state.broker,
        stomp_auth=(
            None if config.stomp is None else "users-file" if config.stomp_users else "none"
        ),
        cluster=state.cluster,
        coordination=config.coordination,
        coordination_session=state.coordination_session,
        coordinator_behind_share=state.behind_share_floor is not None,
        share_unusable=state.share_unusable,
        follower=follower_figures(follower),
    )


def _lock_io_overdue_at(machine: RoleMachine) -> float:
    """When a lock operation under way stops counting as alive (a hung share)."""
    started = machine.lock_io_started_at
    if started is None:
        return float("inf")
    timings = machine.timings
    return started + 2 * max(
        timings.lock_keep_alive_period_s, timings.lock_acquire_sleep_interval_s
    )


def journal_figures(store: JournalStore | None) -> JournalFigures | None:
    """The journal part of ``/status`` (None unless this node has the journal open)."""
    if store is None:
        return None
    stats, config = store.stats(), store.config
    return JournalFigures(
        epoch=stats.epoch,
        sync_policy=str(stats.sync_policy),
        last_sequence=stats.last_sequence,
        pending_messages=stats.pending_messages,
        records_written=stats.records_written,
        bytes_written=stats.bytes_written,
        batches_written=stats.batches_written,
        current_segment=stats.current_segment,
        fenced_records=stats.fenced_records_at_open,
        damaged_batches=stats.damaged_batches_at_open,
        torn_tails=stats.torn_tails_at_open,
        failure=stats.failure,
        opened_from=stats.opened_from,
        open_fallback=stats.open_fallback,
        bytes_read_at_open=stats.bytes_read_at_open,
        settings=JournalSettings(
            segment_max_bytes=config.segment_max_bytes,
            max_message_size=config.max_message_size,
            retention_max_age_s=config.retention_max_age_s,
            retention_max_bytes=config.retention_max_bytes,
            dedupe_window_messages=config.dedupe_window_messages,
        ),
    )


def follower_figures(status: FollowerStatus | None) -> FollowerFigures | None:
    """The follower part of ``/status`` (None if this node follows no journal)."""
    if status is None:
        return None
    return FollowerFigures(
        mode=status.mode,
        last_sequence=status.last_sequence,
        position_bytes=status.position_bytes,
        lag_bytes=status.lag_bytes,
        lag_s=status.lag_s,
        fallbacks=status.fallbacks,
        last_fallback=status.last_fallback,
    )


def broker_figures(stats: dict[str, Any] | None) -> BrokerFigures | None:
    """The broker part of ``/status`` from ``BrokerService.stats`` of a started service (the
    only kind ``Serving`` hands out): a key either side lacks raises here, never reads as 0
    (tests/api/test_status_snapshot.py converts a real broker's)."""
    if stats is None:
        return None
    return BrokerFigures(**stats)
