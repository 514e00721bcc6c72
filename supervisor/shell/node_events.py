"""What the node's threads tell the role loop that is not the role machine's business.

Each is immutable and carries what its thread found, so the role loop can
update the node's state itself: no other thread writes that state. What the
lock I/O worker finds is the role machine's own events (``roles.LockResult``,
``roles.EpochClaimed``, ...), which carry what the loop records besides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from primacy.api.snapshot import ClusterMember
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.machine.roles import Priority


@dataclass(frozen=True)
class RegistryRead:
    """The share's node registry and pause marker, as the registry thread last read them."""

    cluster: tuple[ClusterMember, ...]
    best_other_priority: Priority
    paused: bool
    broker_stats: dict[str, Any] | None = None


@dataclass(frozen=True)
class ConfigEdited:
    """A valid new version of the config file; the loop applies its live keys."""

    config: NodeConfig


@dataclass(frozen=True)
class ThreadDied:
    """A thread of the node raised; the node stops and exits non-zero rather than limp on."""

    thread: str
    error: str


@dataclass(frozen=True)
class ChildReady:
    """The exec child passed its readiness check (``exec_ready``, ``exec_ready_cmd``)."""


@dataclass(frozen=True)
class SessionChanged:
    """The coordination service's session changed state (ZooKeeper: connected, suspended,
    lost); a hint for /status and the metrics: the lease check decides, never this."""

    state: str


NodeEvent = RegistryRead | ConfigEdited | ThreadDied | ChildReady | SessionChanged
