"""What the node's threads tell the role loop that is not the role machine's business.

Each is immutable and carries what its thread found, so the role loop can
update the node's state itself: no other thread writes that state. What the
lock I/O worker finds is the role machine's own events (``roles.LockResult``,
``roles.EpochClaimed``, ...), which carry what the loop records besides.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from primacy.api.snapshot import ClusterMember
from primacy.supervisor import codes
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.machine.roles import Priority

log = logging.getLogger("primacy.node")


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


def thread_death_hook(
    node_id: str, post: Callable[[ThreadDied], None]
) -> Callable[[threading.ExceptHookArgs], None]:
    """``threading.excepthook`` for a node: a thread of ours that dies is logged, and the node
    is stopped (``ThreadDied``) rather than run on without it."""

    def on_thread_death(args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else "?"
        log.error(
            "%s node %s: thread %s died: %r",
            codes.THREAD_DIED,
            node_id,
            name,
            args.exc_value,
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),  # type: ignore[arg-type]
        )
        post(ThreadDied(name, repr(args.exc_value)))

    return on_thread_death
