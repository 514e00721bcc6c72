"""Wakes a slave when the share shows that the master went away, so it need not wait for its poll.

Also notices the group's pause marker appearing or going.

Watches (with ``watchdog``) the lock file and the node registry. A master
that stops gracefully releases the lock first and then publishes its registry
entry, so the entry's change arrives after the lock is free. Deleting the lock
file also wakes slaves. These are hints only: the lock decides.

inotify sees only this host's changes; on NFS or GFS2, changes made by another
host raise no event and slaves fall back to their poll interval.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from locker.lockfile import LOCK_FILE_NAME
from supervisor.group_control import PAUSED_FILE_NAME
from supervisor.registry import NODES_DIR_NAME

log = logging.getLogger("primacy.share_events")
_SERVING_ROLES = {"acquired", "master"}


class _Handler(FileSystemEventHandler):
    def __init__(
        self,
        own_node_id: str,
        on_master_left: Callable[[], None],
        on_pause_changed: Callable[[], None],
    ) -> None:
        self._own = own_node_id
        self._on_master_left = on_master_left
        self._on_pause_changed = on_pause_changed
        self._roles: dict[str, str] = {}

    def on_any_event(self, event: FileSystemEvent) -> None:
        path = Path(str(event.dest_path or event.src_path))
        if path.name == LOCK_FILE_NAME and event.event_type == "deleted":
            self._on_master_left()
        elif path.name == PAUSED_FILE_NAME:
            self._on_pause_changed()
        elif (
            path.parent.name == NODES_DIR_NAME
            and path.suffix == ".json"
            and not path.name.startswith(".")
        ):
            self._on_registry_entry(path)

    def _on_registry_entry(self, path: Path) -> None:
        node_id = path.stem
        if node_id == self._own:
            return
        try:
            role = str(json.loads(path.read_text())["role"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        previous = self._roles.get(node_id)
        self._roles[node_id] = role
        if previous in _SERVING_ROLES and role not in _SERVING_ROLES:
            self._on_master_left()


class ShareWatcher:
    """Owns a watchdog observer on the share; ``stop`` ends its thread."""

    def __init__(
        self,
        share: Path,
        own_node_id: str,
        on_master_left: Callable[[], None],
        on_pause_changed: Callable[[], None],
    ) -> None:
        self._observer = Observer()
        self._observer.daemon = True
        handler = _Handler(own_node_id, on_master_left, on_pause_changed)
        nodes = Path(share) / NODES_DIR_NAME
        nodes.mkdir(exist_ok=True)
        self._observer.schedule(handler, str(share), recursive=False)
        self._observer.schedule(handler, str(nodes), recursive=False)

    def start(self) -> None:
        try:
            self._observer.start()
        except OSError as exc:  # inotify limits, or a filesystem without events
            log.warning("PRIMACY-1011 share events unavailable (%s); slaves rely on polling", exc)

    def stop(self) -> None:
        if self._observer.is_alive():
            self._observer.stop()
            self._observer.join(5)
