"""The emulated network between one client mount and the server: healthy, partitioned or healed.

Every filesystem operation passes ``Network.gate()`` first. While healthy it
returns at once; in ``partition-eio`` it raises EIO (a soft mount after
timeo/retrans); in ``partition-hang`` it blocks until the partition heals (a
hard mount). A partition that outlasts ``lease_s`` expires the client's
lease: the ``on_lease_expired`` callback runs once (the server drops the
client's locks), exactly as an NFSv4 server does when the client stops
renewing.
"""

from __future__ import annotations

import enum
import errno
import threading
import time
from collections.abc import Callable

from mfusepy import FuseOSError


class Mode(enum.StrEnum):
    """What the link between this mount and the server currently does."""

    HEALTHY = "healthy"
    PARTITION_EIO = "partition-eio"
    PARTITION_HANG = "partition-hang"
    # The daemon is shutting down: everything fails at once so no thread hangs.
    STOPPING = "stopping"


class Network:
    """The mode of one mount's link to the server, with the lease timer of a partition."""

    def __init__(self, lease_s: float, on_lease_expired: Callable[[], None]) -> None:
        self.lease_s = lease_s
        self._on_lease_expired = on_lease_expired
        self._changed = threading.Condition()
        self._mode = Mode.HEALTHY
        self._partitions = 0
        self._partitioned_at_s: float | None = None
        self._lease_expired = False
        self._timer: threading.Timer | None = None
        self._held = 0  # operations read from the kernel and held by a hang partition

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def partitioned(self) -> bool:
        return self._mode in (Mode.PARTITION_EIO, Mode.PARTITION_HANG)

    def gate(self) -> None:
        """Return if the server is reachable; raise EIO or block as the mode says."""
        with self._changed:
            self._held += 1
            try:
                while self._mode is Mode.PARTITION_HANG:
                    self._changed.wait()
            finally:
                self._held -= 1
            if self._mode is not Mode.HEALTHY:
                raise FuseOSError(errno.EIO)

    def partition(self, mode: Mode) -> None:
        """Cut the link; the lease timer starts now unless a partition is already running."""
        if mode not in (Mode.PARTITION_EIO, Mode.PARTITION_HANG):
            raise ValueError(f"not a partition mode: {mode}")
        with self._changed:
            if self._mode is Mode.STOPPING:
                return
            already_partitioned = self.partitioned
            self._mode = mode
            self._changed.notify_all()
            if already_partitioned:
                # Switching eio <-> hang keeps the running lease clock.
                return
            self._partitions += 1
            self._partitioned_at_s = time.monotonic()
            self._lease_expired = False
            serial = self._partitions
            self._timer = threading.Timer(self.lease_s, self._expire_if_still_cut, (serial,))
            self._timer.daemon = True
            self._timer.start()

    def heal(self, on_healed: Callable[[], None]) -> None:
        """Restore the link; ``on_healed`` runs first, while operations are still held back."""
        with self._changed:
            if not self.partitioned:
                return
            self._cancel_timer()
            on_healed()
            self._mode = Mode.HEALTHY
            self._partitioned_at_s = None
            self._changed.notify_all()

    def expire_now(self) -> bool:
        """Expire the lease of the running partition at once; False if not partitioned."""
        with self._changed:
            if not self.partitioned:
                return False
            self._cancel_timer()
            self._expire_locked()
            return True

    def stop(self) -> None:
        """Fail every operation from now on and wake every blocked one."""
        with self._changed:
            self._cancel_timer()
            self._mode = Mode.STOPPING
            self._changed.notify_all()

    def snapshot(self) -> dict[str, object]:
        with self._changed:
            since = self._partitioned_at_s
            return {
                "mode": str(self._mode),
                "lease_s": self.lease_s,
                "partitions": self._partitions,
                "partitioned_for_s": None if since is None else time.monotonic() - since,
                "lease_expired": self._lease_expired,
                "held": self._held,
            }

    def _expire_if_still_cut(self, serial: int) -> None:
        with self._changed:
            if self.partitioned and serial == self._partitions:
                self._expire_locked()

    def _expire_locked(self) -> None:
        if not self._lease_expired:
            self._lease_expired = True
            self._on_lease_expired()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
