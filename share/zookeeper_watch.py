"""What a ZooKeeper ensemble tells a node unasked: watches on the lock and the pause marker
(hints that wake the role loop, never decisions), and the session timeout it granted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient  # type: ignore[import-untyped]


class ZooKeeperWatch:
    """ZooKeeper's own watches on the lock and the pause marker: hints, never decisions."""

    def __init__(
        self,
        client: KazooClient,
        lock_path: str,
        paused_path: str,
        on_master_left: Callable[[], None],
        on_pause_changed: Callable[[], None],
    ) -> None:
        self._client = client
        self._lock_path = lock_path
        self._paused_path = paused_path
        self._on_master_left = on_master_left
        self._on_pause_changed = on_pause_changed
        self._running = False

    def start(self) -> None:
        self._running = True
        client = self._client
        lock_seen = [False]
        pause_seen: list[bool | None] = [None]

        def lock_changed(data: bytes | None, stat: Any, event: Any) -> bool:
            exists = stat is not None
            if lock_seen[0] and not exists:
                self._on_master_left()
            lock_seen[0] = exists
            return self._running

        def pause_changed(data: bytes | None, stat: Any, event: Any) -> bool:
            exists = stat is not None
            if pause_seen[0] is not None and exists != pause_seen[0]:
                self._on_pause_changed()
            pause_seen[0] = exists
            return self._running

        def register() -> None:
            # Waits for a connection (kazoo's own thread, ended by ``close``), then kazoo
            # keeps the watches set across reconnects.
            client.DataWatch(self._lock_path, lock_changed)
            client.DataWatch(self._paused_path, pause_changed)

        client.handler.spawn(register)

    def stop(self) -> None:
        self._running = False  # each watch ends at its next event


def watch_granted_timeout(client: KazooClient) -> list[float]:
    """A list that gets the session timeout (s) the ensemble grants ``client`` at each connect.

    kazoo keeps the granted timeout to itself (its ``_session_timeout`` stays what was asked
    for); its connection's ``_connect`` returns the read timeout it derives from it, two
    thirds of the granted timeout, so the granted one is read back from that.
    """
    granted: list[float] = []
    connection = client._connection
    connect = connection._connect

    def connect_and_note(*args: Any) -> Any:
        read_timeout_ms, connect_timeout_ms = connect(*args)
        granted.append(round(read_timeout_ms * 3 / 2) / 1000)
        return read_timeout_ms, connect_timeout_ms

    connection._connect = connect_and_note
    return granted
