"""A connection's replies, in the order of the frames that asked for them, each once it is durable.

Every journal write a frame causes is passed along with its reply (a RECEIPT,
an ERROR, CONNECTED, or nothing); a reply is sent only when every write of its
own frame and of every frame before it completed. So a RECEIPT always means:
this frame and everything the connection sent before it is journaled per the
sync policy and passed the fencing check. A failed write stops the queue for
good: nothing behind it is ever sent (the broker aborts the connection).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from primacy.broker.frames import Frame

Writes = list[asyncio.Future[int]]


@dataclass
class _Reply:
    waits_for: Writes
    frame: Frame | None
    then_close: bool


class ReplyQueue:
    def __init__(self, send: Callable[[Frame], None], close: Callable[[], None]) -> None:
        self._send = send
        self._close = close
        self._replies: deque[_Reply] = deque()
        self._closed = False

    def after(self, writes: Writes, frame: Frame | None, then_close: bool = False) -> None:
        """Send ``frame`` (if any) once ``writes`` and everything queued before are durable;
        ``then_close``: close the connection after it, and send nothing more."""
        self._replies.append(_Reply(writes, frame, then_close))
        for write in writes:
            if not write.done():
                write.add_done_callback(lambda _: self._send_ready())
        self._send_ready()

    def clear(self) -> None:
        """The connection is gone: drop every reply still waiting."""
        self._closed = True
        self._replies.clear()

    def _send_ready(self) -> None:
        while self._replies and not self._closed:
            head = self._replies[0]
            for write in head.waits_for:  # usually one: a loop, not two generators
                if not write.done():
                    return
                if write.cancelled() or write.exception() is not None:
                    return  # the broker is failing and aborts the connection
            self._replies.popleft()
            if head.frame is not None:
                self._send(head.frame)
            if head.then_close:
                self.clear()
                self._close()
