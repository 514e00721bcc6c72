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
from collections import deque
from collections.abc import Callable
from typing import Protocol

from primacy.broker import codes
from primacy.broker.backlog import Backlog, Full
from primacy.broker.counters import Counters
from primacy.broker.frames import Frame
from primacy.broker.refusals import Refused

# The SEND header that asks for an ERROR instead of a wait, and its values.
IF_FULL_HEADER = "if-full"
IF_FULL_WAIT = "wait"
IF_FULL_ERROR = "error"


def check_room(
    backlog: Backlog,
    counters: Counters,
    destination: str,
    frame: Frame,
    is_resend: Callable[[], bool],
) -> None:
    """Refused (``codes.DESTINATION_FULL``) or Full when ``destination`` has no room for the SEND
    ``frame``; ``is_resend`` (asked only then) says it needs none."""
    reason = backlog.full(destination)
    if reason is None or is_resend():
        return
    if_full = frame.get(IF_FULL_HEADER) or IF_FULL_WAIT
    if if_full not in (IF_FULL_WAIT, IF_FULL_ERROR):
        raise Refused(codes.BAD_REQUEST, f"{IF_FULL_HEADER} must be wait or error")
    if if_full == IF_FULL_ERROR:
        counters.sends_refused_full += 1
        raise Refused(codes.DESTINATION_FULL, f"{reason}; nothing was stored")
    raise Full(destination, reason)


class Holder(Protocol):
    """What ``HeldFrames`` needs from its connection."""

    @property
    def closing(self) -> bool: ...

    def handle(self, frame: Frame) -> None: ...

    def pause_reading(self) -> None: ...

    def resume_reading_if_due(self) -> None: ...

    def refuse(self, code: str, detail: str, receipt: str | None) -> None: ...


class HeldFrames:
    """One connection's frames held behind one that waits (a SEND for room, a CONNECT for
    its login check), oldest first, and a waiting SEND's deadline. While any are held the
    connection reads nothing more (behind a CONNECT, nothing more once a frame follows it:
    until then it reads on, and sees a client that hangs up)."""

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

    def hold(self, frame: Frame, *, pause_reading: bool = True) -> None:
        """Keep ``frame`` (and every later one) until ``release``; reading goes on only while
        nothing arrives behind it, if ``pause_reading`` is false (the connection pauses then)."""
        self._frames.appendleft(frame)
        if pause_reading:
            self.holder.pause_reading()

    def wait_for_room(self, frame: Frame, full: Full) -> None:
        """Keep ``frame`` (and every later one) until ``full.destination`` has room."""
        self.hold(frame)
        if frame is not self._waiting_send:  # one woken and held again keeps its deadline
            self._waiting_send = frame
            self.counters.sends_held += 1
            reason = str(full)
            loop = self.backlog.loop
            self._deadline = loop.call_later(self.timeout_s, lambda: self._give_up(reason))
        self.backlog.wait(self, full.destination, self.release)

    def clear(self) -> None:
        """The connection is going: forget the frames, the wait and the deadline."""
        self.backlog.cancel(self)
        self._frames.clear()
        self._waiting_send = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def release(self) -> None:
        """Handle the held frames in order, until one has to wait again."""
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
