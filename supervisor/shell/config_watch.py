"""Applies edits of the node's config file while it runs: valid edits now, invalid ones refused.

Editors save in several steps (write a temp file, rename it over the old one),
so changes are collected for a short quiet period before the file is read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from primacy.share.watch import CHANGE_EVENTS
from primacy.supervisor import codes
from primacy.supervisor.config import LIVE_KEYS, ConfigError, NodeConfig

log = logging.getLogger("primacy.config")
_QUIET_S = 0.2


class ConfigWatcher(FileSystemEventHandler):
    """Watches one file; calls ``apply`` with each valid new configuration."""

    def __init__(
        self, path: Path, reload: Callable[[], NodeConfig], apply: Callable[[NodeConfig], None]
    ) -> None:
        self._path = Path(path).resolve()
        self._reload = reload
        self._apply = apply
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._observer = Observer()
        self._observer.daemon = True
        self._observer.schedule(
            self, str(self._path.parent), recursive=False, event_filter=CHANGE_EVENTS
        )

    def start(self) -> None:
        self._observer.start()

    def stop(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
        if self._observer.is_alive():
            self._observer.stop()
            self._observer.join(5)

    def on_any_event(self, event: FileSystemEvent) -> None:
        touched = {Path(str(event.src_path)).resolve()}
        if event.dest_path:
            touched.add(Path(str(event.dest_path)).resolve())
        if self._path not in touched:
            return
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(_QUIET_S, self._reload_now)
            self._timer.daemon = True
            self._timer.start()

    def _reload_now(self) -> None:
        try:
            config = self._reload()
        except ConfigError as exc:
            log.error(
                "%s the edited config file %s was rejected, the running configuration stays: %s",
                codes.CONFIG_REJECTED,
                self._path,
                exc,
            )
            return
        self._apply(config)


def live_edit(old: NodeConfig, new: NodeConfig) -> tuple[NodeConfig, frozenset[str]]:
    """What a running node takes from a valid edit: the config to run with now (its live keys
    from ``new``, every other key from ``old``) and the live keys that changed. Each other
    changed key is logged as waiting for a restart."""
    changed = {k for k in type(old).model_fields if getattr(old, k) != getattr(new, k)}
    for name in sorted(changed - LIVE_KEYS):
        log.warning(
            "%s node %s: %s changed in the config file; it takes effect after a restart",
            codes.RESTART_NEEDED,
            old.node_id,
            name,
        )
    # Only the live keys: the rest (share, node id, journal settings, ...) must wait for the
    # restart the log asks for. A share or node id swapped under a running node would pair
    # one share's lease with another's journal.
    live = frozenset(changed & LIVE_KEYS)
    log.info(
        "%s node %s applied the edited config: %s",
        codes.CONFIG_APPLIED,
        old.node_id,
        ", ".join(sorted(live)) or "nothing live changed",
    )
    return old.model_copy(update={name: getattr(new, name) for name in live}), live
