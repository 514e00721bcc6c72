"""A slave's judgement that the lock's holder has stalled, so the lock file may be replaced.

On NFSv4 a crashed host's lock outlives it by the server's lease (60 s with
ganesha's default, 90 s with Linux nfsd's): the server cannot tell a dead client
from a quiet one. The epoch fences a master that lost its lock whatever the
reason (docs/safety.md), so freeing the lock early costs no promise; the
only question is when a slave should do it. Its answer is what it can see for
itself: the holder's registry entry, which a live master rewrites every
registry refresh, has stayed exactly the same for ``threshold_s`` of the
slave's own monotonic clock, at every one of its refused lock attempts. A
wrong judgement (a master merely slow to refresh its entry) costs a failover,
never a message: that master's next lease check sees the replaced lock file.
"""

from __future__ import annotations

from collections.abc import Callable

from primacy.share.records import HolderInfo, NodeEntry

Sighting = tuple[str, str, int, float]
"""What one refused attempt saw of the holder: its node, host, pid and entry timestamp."""


def sighting(holder: HolderInfo | None, entries: list[NodeEntry]) -> Sighting | None:
    """The holder's registry entry, if the lock file names a holder that has one.

    None when there is nothing to judge by: no holder record, a released one (the
    lock is changing hands), or a holder with no entry.
    """
    if holder is None or holder.released:
        return None
    entry = next((e for e in entries if e.node_id == holder.node_id), None)
    if entry is None:
        return None
    return (entry.node_id, entry.host, entry.pid, entry.updated_unix_s)


class StallWatch:
    """Counts how long the same sighting has been seen; one per slave, on its lock worker."""

    def __init__(self, threshold_s: float, clock: Callable[[], float]) -> None:
        self.threshold_s = threshold_s
        self._clock = clock
        self._seen: Sighting | None = None
        self._since = 0.0

    def stalled(self, seen: Sighting | None) -> bool:
        """Whether ``seen`` has not changed for the threshold; any change starts over."""
        now = self._clock()
        if seen is None or seen != self._seen:
            self._seen = seen
            self._since = now
            return False
        return now - self._since >= self.threshold_s

    def unchanged_for_s(self) -> float:
        return self._clock() - self._since

    def reset(self) -> None:
        self._seen = None
