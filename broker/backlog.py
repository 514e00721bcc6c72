"""Unacknowledged messages per destination and in all, against their limits, and who waits.

Counted from a SEND's submission to its ACK's, recovered messages included; see
``flow_control.py`` for what a connection does when there is no room.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable


class Full(Exception):
    """A SEND found no room; its connection holds it until ``Backlog`` wakes it."""

    def __init__(self, destination: str, reason: str) -> None:
        super().__init__(reason)
        self.destination = destination


class Backlog:
    """Unacknowledged messages per destination and in all, against their limits, and the
    connections waiting for room. Lives on the broker's event loop like the rest of it."""

    def __init__(
        self, max_per_destination: int, max_total: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.max_per_destination = max_per_destination
        self.max_total = max_total
        self.loop = loop
        self.counts: Counter[str] = Counter()
        self.total = 0
        self._waiting: dict[object, tuple[str, Callable[[], None]]] = {}
        self._wake_scheduled = False

    def added(self, destination: str) -> None:
        self.counts[destination] += 1
        self.total += 1

    def removed(self, destination: str) -> None:
        left = self.counts[destination] - 1
        if left > 0:
            self.counts[destination] = left
        else:
            del self.counts[destination]  # forgotten destinations cost nothing here either
        self.total -= 1
        if self._waiting and not self._wake_scheduled:
            self._wake_scheduled = True
            self.loop.call_soon(self._wake)

    def full(self, destination: str) -> str | None:
        """Why a new message for ``destination`` must wait, or None if there is room."""
        if self.counts[destination] >= self.max_per_destination:
            return (
                f"destination {destination[:100]!r} holds {self.counts[destination]} "
                f"unacknowledged messages (max_destination_messages {self.max_per_destination})"
            )
        if self.total >= self.max_total:
            return (
                f"the broker holds {self.total} unacknowledged messages "
                f"(max_pending_messages {self.max_total})"
            )
        return None

    def full_for(self, sends: Counter[str]) -> str | None:
        """Why these new messages (per destination) do not all fit now, or None if they do."""
        for destination, count in sends.items():
            if self.counts[destination] + count > self.max_per_destination:
                return (
                    f"destination {destination[:100]!r} holds {self.counts[destination]} "
                    f"unacknowledged messages and the transaction adds {count} "
                    f"(max_destination_messages {self.max_per_destination})"
                )
        added = sum(sends.values())
        if self.total + added > self.max_total:
            return (
                f"the broker holds {self.total} unacknowledged messages and the transaction "
                f"adds {added} (max_pending_messages {self.max_total})"
            )
        return None

    def wait(self, token: object, destination: str, wake: Callable[[], None]) -> None:
        """Call ``wake`` (once) when ``destination`` has room; ``token`` names the waiter."""
        self._waiting[token] = (destination, wake)

    def cancel(self, token: object) -> None:
        self._waiting.pop(token, None)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _wake(self) -> None:
        self._wake_scheduled = False
        for token, (destination, wake) in list(self._waiting.items()):
            # Every waiter with room is woken; one that finds the room taken by another
            # when its SEND is handled again simply waits again.
            if token in self._waiting and self.full(destination) is None:
                del self._waiting[token]
                wake()
