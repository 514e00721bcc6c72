"""Per-path faults of one emulated mount, beside the partitions: slow fsync, EIO under a prefix.

A partition cuts the whole mount; these hit only some operations, as a
struggling server does: ``slow-fsync MS`` delays every fsync and fdatasync by
MS milliseconds (a congested or degraded server), ``eio-path PREFIX`` fails
every operation on a path under PREFIX (e.g. ``/journal``) with EIO while the
rest of the share works (one failing export or disk), ``clear-faults`` ends both.
"""

from __future__ import annotations

import errno
import threading
import time

from mfusepy import FuseOSError


class PathFaults:
    """The per-path faults in force; checked by every operation that names a path."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._fsync_delay_s = 0.0
        self._eio_prefixes: tuple[str, ...] = ()

    def slow_fsync(self, delay_ms: float) -> None:
        if delay_ms < 0:
            raise ValueError("the fsync delay cannot be negative")
        with self._mutex:
            self._fsync_delay_s = delay_ms / 1000

    def eio_under(self, prefix: str) -> None:
        if not prefix.startswith("/"):
            raise ValueError(f"a path prefix inside the mount starts with '/': {prefix!r}")
        with self._mutex:
            self._eio_prefixes += (prefix.rstrip("/") or "/",)

    def clear(self) -> None:
        with self._mutex:
            self._fsync_delay_s = 0.0
            self._eio_prefixes = ()

    def check(self, path: str | None) -> None:
        """Raise EIO if ``path`` lies under a failing prefix."""
        if path is None:
            return
        for prefix in self._eio_prefixes:
            if prefix == "/" or path == prefix or path.startswith(prefix + "/"):
                raise FuseOSError(errno.EIO)

    def delay_fsync(self) -> None:
        delay_s = self._fsync_delay_s
        if delay_s > 0:
            time.sleep(delay_s)

    def snapshot(self) -> dict[str, object]:
        with self._mutex:
            return {
                "fsync_delay_ms": self._fsync_delay_s * 1000,
                "eio_prefixes": list(self._eio_prefixes),
            }
