"""One connection's timers: the CONNECT deadline and STOMP heart-beats, both directions.

The broker sends an EOL when it has written nothing for half the negotiated
interval, and cuts off a client it has heard nothing from for
``heart_beat_grace_factor`` intervals. While the connection is not being read
(flow control holds it) the client's heart-beats wait unread in the socket as
its frames do, so silence then is not held against it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from primacy.broker.frames import HEARTBEAT


class ConnectionTimers:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        grace_factor: float,
        write: Callable[[bytes], None],
        reading_paused: Callable[[], bool],
        silent_too_long: Callable[[str], None],
    ) -> None:
        self.loop = loop
        self.grace_factor = grace_factor
        self._write = write
        self._reading_paused = reading_paused
        self._silent_too_long = silent_too_long
        self.last_received_s = self.last_sent_s = loop.time()
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def received(self) -> None:
        self.last_received_s = self.loop.time()

    def sent(self) -> None:
        self.last_sent_s = self.loop.time()

    def later(self, name: str, delay_s: float, callback: Callable[[], None]) -> None:
        self.cancel(name)
        self._timers[name] = self.loop.call_later(delay_s, callback)

    def cancel(self, name: str) -> None:
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def start_heart_beats(self, send_ms: int, expect_ms: int) -> None:
        """The negotiated intervals (0: that direction is off)."""
        if send_ms:
            self._every("heart-beat-send", send_ms / 2000, lambda: self._send(send_ms))
        if expect_ms:
            self._every("heart-beat-check", expect_ms / 1000, lambda: self._check(expect_ms))

    def _every(self, name: str, interval_s: float, callback: Callable[[], None]) -> None:
        def tick() -> None:
            callback()
            if name in self._timers:  # not stopped by the callback
                self.later(name, interval_s, tick)

        self.later(name, interval_s, tick)

    def _send(self, send_ms: int) -> None:
        if self.loop.time() - self.last_sent_s >= send_ms / 2000:
            self._write(HEARTBEAT)

    def _check(self, expect_ms: int) -> None:
        if self._reading_paused():
            return
        silent_s = self.loop.time() - self.last_received_s
        if silent_s > expect_ms / 1000 * self.grace_factor:
            self._silent_too_long(
                f"nothing received for {silent_s:.1f} s; heart-beats were due every {expect_ms} ms"
            )
