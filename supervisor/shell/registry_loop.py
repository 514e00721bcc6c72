"""The registry thread: publishes this node in the share, reads the group, tells the role loop.

Every ``registry_refresh_ms``, or at once when woken, it writes this node's
entry from the snapshot the role loop last published, reads the other
entries and the pause marker, and posts one ``RegistryRead`` event. It keeps
no state the loop reads: what it learns travels in the event.

It never waits on the broker. Slaves judge a master stalled when its entry
stops changing (``stall_takeover_ms``, as little as three refreshes), and the
broker's figures are read on the broker's own event loop, which a busy broker
answers late (up to 2 s). So a second thread, the stats thread, gathers them
at the same pace, and each publication carries the last figures it gathered
(one refresh old at most, plus however late the broker answered): a slow
broker makes the figures late, never the entry.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from primacy.api.snapshot import ClusterMember, StatusSnapshot
from primacy.share.port import SharePort
from primacy.share.records import NodeEntry
from primacy.supervisor import codes
from primacy.supervisor.machine.roles import Priority, Role
from primacy.supervisor.shell.node_events import RegistryRead
from primacy.supervisor.shell.thread_deaths import ThreadDeaths, owned_thread

log = logging.getLogger("primacy.node")


class RegistryLoop:
    """Owns the registry thread; ``close`` ends it after one last publication."""

    def __init__(
        self,
        port: SharePort,
        node_id: str,
        http_address: str,
        refresh_s: float,
        snapshot: Callable[[], StatusSnapshot],
        broker_stats: Callable[[], dict[str, Any] | None],
        post: Callable[[RegistryRead], None],
        deaths: ThreadDeaths | None = None,
    ) -> None:
        self._port = port
        self._node_id = node_id
        self._http = http_address
        self._refresh_s = refresh_s
        self._snapshot = snapshot
        self._broker_stats = broker_stats
        self._post = post
        self._wake = threading.Event()
        self._released = threading.Event()
        self._stop = threading.Event()
        self._thread = owned_thread(deaths, self._run, "primacy-registry")
        # The stats thread's last gathering: one reference, replaced whole, never mutated.
        self._last_stats: dict[str, Any] | None = None
        self._gather = threading.Event()
        self._stats_thread = owned_thread(deaths, self._gather_stats, "primacy-broker-stats")

    def start(self) -> None:
        self._stats_thread.start()
        self._thread.start()

    def wake(self) -> None:
        """Publish now (the role changed, or the pause marker did); gather fresh figures too."""
        self._wake.set()
        self._gather.set()

    def publish_released(self) -> None:
        """The lock was just let go: say so now, even before the role loop catches up
        (slaves take the entry's role as the signal to try the lock)."""
        self._released.set()
        self._wake.set()

    def close(self, timeout_s: float, final: bool) -> None:
        """End the thread; ``final``: publish the last role once more (it wakes the slaves)."""
        self._stop.set()
        self._wake.set()
        self._gather.set()
        deadline = time.monotonic() + timeout_s
        self._thread.join(timeout_s)
        if final:
            try:
                self._refresh()  # on the closing thread (the role loop's): it must not raise
            except Exception as exc:
                log.warning(
                    "%s node %s: the last registry entry was not written: %r",
                    codes.REGISTRY_NOT_REFRESHED,
                    self._node_id,
                    exc,
                )
        # Ends once the broker answers its last call (at most the broker's own bound).
        self._stats_thread.join(max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._refresh()
            self._wake.wait(self._refresh_s)
            self._wake.clear()

    def _gather_stats(self) -> None:
        asked = False
        while not self._stop.is_set():
            self._last_stats = self._broker_stats()
            if asked:
                # A role change asked for these; its own publication went out with the
                # figures gathered before it (the broker's call takes a while): publish again
                # now, or /status shows a new master's figures one refresh late.
                self._wake.set()
            asked = self._gather.wait(self._refresh_s)
            self._gather.clear()

    def _refresh(self) -> None:
        snap = self._snapshot()
        role = snap.role
        if self._released.is_set():
            self._released.clear()
            role = str(Role.STOPPED if role in (Role.STOPPING, Role.STOPPED) else Role.SLAVE)
        entry = NodeEntry(
            self._node_id,
            socket.gethostname(),
            os.getpid(),
            self._http,
            snap.priority,
            role,
            snap.epoch,
            time.time(),
        )
        try:
            self._port.publish_node(entry)
            entries = self._port.node_entries()
            paused = self._port.is_paused()
        except OSError as exc:
            log.warning(
                "%s node %s cannot refresh the node registry: %s",
                codes.REGISTRY_NOT_REFRESHED,
                self._node_id,
                exc,
            )
            return
        now = time.time()
        others = [e for e in entries if e.node_id != self._node_id and e.is_live(now)]
        self._post(
            RegistryRead(
                cluster=tuple(ClusterMember(**asdict(e), live=e.is_live(now)) for e in entries),
                best_other_priority=max(
                    (Priority.of_entry(other.priority) for other in others), default=Priority.NEVER
                ),
                paused=paused,
                broker_stats=self._last_stats,  # never a call to the broker from this thread
            )
        )
