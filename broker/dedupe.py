"""The window of recent messages: a resend to the same destination is acknowledged, not stored.

It mirrors the journal's own window (``JournalState.seen_messages``, the last
``dedupe_window_messages`` distinct (destination, message id) pairs, kept in
checkpoints and rebuilt by recovery), so after a failover the new master drops
exactly the resends the old one would have dropped. The journal's live copy is
private to its writer thread; this one is kept on the broker's loop from the
same events (a pair enters when its SEND is submitted, in submit order, which
is journal order).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

MessageKey = tuple[str, str]  # (destination, message id)


class DedupeWindow:
    """The newest ``capacity`` distinct (destination, message id) pairs."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._keys: OrderedDict[MessageKey, None] = OrderedDict()

    @classmethod
    def recovered(cls, capacity: int, seen_in_order: Iterable[MessageKey]) -> DedupeWindow:
        """Rebuild from the journal's window, oldest first."""
        window = cls(capacity)
        for key in seen_in_order:
            window.add(key)
        return window

    def __contains__(self, key: MessageKey) -> bool:
        return key in self._keys

    def add(self, key: MessageKey) -> None:
        if key in self._keys:
            return
        self._keys[key] = None
        if len(self._keys) > self.capacity:
            self._keys.popitem(last=False)

    def __len__(self) -> int:
        return len(self._keys)
