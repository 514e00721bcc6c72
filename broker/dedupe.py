"""The window of recent message ids: a resend whose id is in it is acknowledged, not stored again.

It mirrors the journal's own window (``JournalState.seen_message_ids``, the
last ``dedupe_window_messages`` distinct ids, kept in checkpoints and rebuilt
by recovery), so after a failover the new master drops exactly the resends
the old one would have dropped. The journal's live copy is private to its
writer thread; this one is kept on the broker's loop from the same events (an
id enters when its SEND is submitted, in submit order, which is journal order).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

UNKNOWN_DESTINATION = ""  # ids recovered from the journal whose message was already acked


class DedupeWindow:
    """Message id -> destination for the newest ``capacity`` distinct ids."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._ids: OrderedDict[str, str] = OrderedDict()

    @classmethod
    def recovered(
        cls,
        capacity: int,
        seen_ids_in_order: Iterable[str],
        pending_destinations: dict[str, str],
    ) -> DedupeWindow:
        """Rebuild from the journal: ids in journal order, destinations where still known."""
        window = cls(capacity)
        for message_id in seen_ids_in_order:
            window.add(message_id, pending_destinations.get(message_id, UNKNOWN_DESTINATION))
        return window

    def destination_of(self, message_id: str) -> str | None:
        """None if the id is not in the window; UNKNOWN_DESTINATION if seen but not known where."""
        return self._ids.get(message_id)

    def add(self, message_id: str, destination: str) -> None:
        if message_id in self._ids:
            return
        self._ids[message_id] = destination
        if len(self._ids) > self.capacity:
            self._ids.popitem(last=False)

    def __len__(self) -> int:
        return len(self._ids)
