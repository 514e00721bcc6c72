"""Producer flow control: a SEND to a full destination, or to a full broker, waits for room.

A message a master stores stays in its memory (its index entry, and its body up
to ``max_body_memory_bytes``) and on the share until it is acknowledged. So the
unacknowledged messages are what a producer without a consumer grows, and
they are what is limited: ``max_destination_messages`` per destination and
``max_pending_messages`` across the broker. A SEND that finds no room is held
by its connection, with every frame after it, until acknowledgements make
room (or the wait times out: an ERROR, nothing stored); a SEND with the header
``if-full:error`` gets the ERROR at once. Only SENDs from clients wait: a
message moved to a dead-letter queue leaves its own destination in the same
step, so it makes nothing fuller in all.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from primacy.broker import codes
from primacy.broker.frames import Frame

if TYPE_CHECKING:
    from primacy.broker.core import Counters

# The SEND header that asks for an ERROR instead of a wait, and its values.
IF_FULL_HEADER = "if-full"
IF_FULL_WAIT = "wait"
IF_FULL_ERROR = "error"


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


class Holder(Protocol):
    """What ``HeldFrames`` needs from its connection."""

    @property
    def closing(self) -> bool: ...

    def handle(self, frame: Frame) -> None: ...

    def pause_reading(self) -> None: ...

    def resume_reading_if_due(self) -> None: ...

    def refuse(self, code: str, detail: str, receipt: str | None) -> None: ...


class HeldFrames:
    """One connection's frames held behind a SEND that waits for room, oldest first, and
    that SEND's deadline. While any are held the connection reads nothing more."""

    def __init__(self, holder: Holder, backlog: Backlog, counters: Counters, timeout_s: float):
        self.holder = holder
        self.backlog = backlog
        self.counters = counters
        self.timeout_s = timeout_s
        self._frames: deque[Frame] = deque()
        self._waiting_send: Frame | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def __bool__(self) -> bool:
        return bool(self._frames)

    def append(self, frame: Frame) -> None:
        """A frame that arrived behind the waiting SEND: handled after it, in order."""
        self._frames.append(frame)

    def hold(self, frame: Frame, full: Full) -> None:
        """Keep ``frame`` (and every later one) until ``full.destination`` has room."""
        self._frames.appendleft(frame)
        if frame is not self._waiting_send:  # one woken and held again keeps its deadline
            self._waiting_send = frame
            self.counters.sends_held += 1
            reason = str(full)
            loop = self.backlog.loop
            self._deadline = loop.call_later(self.timeout_s, lambda: self._give_up(reason))
        self.holder.pause_reading()
        self.backlog.wait(self, full.destination, self._release)

    def clear(self) -> None:
        """The connection is going: forget the frames, the wait and the deadline."""
        self.backlog.cancel(self)
        self._frames.clear()
        self._waiting_send = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _release(self) -> None:
        """Room again: handle the held frames in order, until one has to wait again."""
        while self._frames and not self.holder.closing:
            frame = self._frames.popleft()
            self.holder.handle(frame)
            if self._frames and self._frames[0] is frame:
                return  # it waits again, with the frames behind it
            if frame is self._waiting_send and self._deadline is not None:
                self._waiting_send = None
                self._deadline.cancel()
                self._deadline = None
        self._frames.clear()
        self.holder.resume_reading_if_due()

    def _give_up(self, reason: str) -> None:
        if not self._frames or self.holder.closing:
            return
        receipt = self._frames[0].get("receipt")
        self.clear()
        self.counters.sends_refused_full += 1
        detail = f"{reason}; waited {self.timeout_s:g} s; nothing was stored"
        self.holder.refuse(codes.DESTINATION_FULL, detail, receipt)
