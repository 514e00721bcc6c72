"""Hints from a shared directory: a slave is woken when the master went away, not at its next poll.

Also notices the group's pause marker appearing or going.

Watches (with ``watchdog``) the lock file and the node registry. A master
lets its lock go by closing the lock file's one descriptor, which raises a
close event on the file after the lock is free; it then publishes its registry
entry as `stopped` (or `slave`), a second, slower hint (watchdog holds rename
events back to pair them). Deleting the lock
file also wakes slaves. These are hints only: the lock decides.

inotify sees only this host's changes; on NFS or GFS2, changes made by another
host raise no event and slaves fall back to their poll interval.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from primacy.share.layout import (
    LOCK_FILE_NAME,
    NODE_ENTRY_SUFFIX,
    NODES_DIR_NAME,
    PAUSED_FILE_NAME,
    ShareLayout,
)
from primacy.share.records import HOLDING_ROLES
from primacy.share.safe_io import read_json, real_directory

log = logging.getLogger("primacy.share_events")
# The only events asked of the kernel (and passed on by watchdog): changes. Reading an
# entry raises open/close events itself, and reacting to those would loop; and a master
# opens the share's epoch directory at every commit (its lease check): with every event
# watched, each open and close woke the observer's thread, about an eighth of a busy
# master's Python time. The config watch asks for the same (its directory is /etc's,
# read by everyone). ``FileClosedEvent`` is IN_CLOSE_WRITE only.
CHANGE_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    DirMovedEvent,
    FileDeletedEvent,
    FileClosedEvent,
]


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
        self.roles: dict[str, str] = {}  # read on the observer's thread, written there too

    def on_any_event(self, event: FileSystemEvent) -> None:
        path = Path(str(event.dest_path or event.src_path))
        if path.name == LOCK_FILE_NAME and event.event_type in ("deleted", "closed"):
            # Closing its descriptor is what drops a holder's lock: the close event
            # (IN_CLOSE_WRITE) comes after the lock is free. Any close wakes us;
            # the lock decides.
            self._on_master_left()
        elif path.name == PAUSED_FILE_NAME:
            self._on_pause_changed()
        elif (
            path.parent.name == NODES_DIR_NAME
            and path.suffix == NODE_ENTRY_SUFFIX
            and not path.name.startswith(".")
        ):
            self._on_registry_entry(path)

    def _on_registry_entry(self, path: Path) -> None:
        node_id = path.stem
        if node_id == self._own:
            return
        try:
            role = str(read_json(path)["role"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        previous = self.roles.get(node_id)
        self.roles[node_id] = role
        if previous in HOLDING_ROLES and role not in HOLDING_ROLES:
            log.debug(
                "node %s left the master role (%s -> %s): trying the lock now",
                node_id,
                previous,
                role,
            )
            self._on_master_left()


class ShareWatcher:
    """Owns a watchdog observer on the share; ``stop`` ends its thread."""

    def __init__(
        self,
        layout: ShareLayout,
        own_node_id: str,
        on_master_left: Callable[[], None],
        on_pause_changed: Callable[[], None],
    ) -> None:
        self._observer = Observer()
        self._observer.daemon = True
        self._handler = _Handler(own_node_id, on_master_left, on_pause_changed)
        real_directory(layout.nodes)
        for directory in (layout.root, layout.nodes):
            self._observer.schedule(
                self._handler, str(directory), recursive=False, event_filter=CHANGE_EVENTS
            )

    def roles_seen(self) -> dict[str, str]:
        """Each other node's role as the last event about its registry entry read it. Events
        of the two watched directories are not delivered in the order they happened
        (watchdog holds a rename back to pair its two halves), so this, not the order of
        other events, tells that an entry was read."""
        return dict(self._handler.roles)

    def start(self) -> None:
        """OSError at inotify's limits, or on a filesystem without events (slaves then poll)."""
        self._observer.start()

    def stop(self) -> None:
        if self._observer.is_alive():
            self._observer.stop()
            self._observer.join(5)
