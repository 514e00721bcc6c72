"""Message expiry: the ``expires`` header (ms since the Unix epoch, as ActiveMQ writes it; 0 or
none: never) and what happens to a message once it passes.

A message is never delivered after its expiry: the broker checks every message as it takes it
for a consumer (``Broker._dispatch``), bodies read back from the journal after a failover
included. An expired message is settled (an ACK record, so recovery does not bring it back) and
counted (``messages_expired``); a *persistent* one (``persistent:true``, the header ActiveMQ's
STOMP users mark it with) first moves to its dead-letter queue, without the ``expires`` header,
as ActiveMQ's default dead-letter strategy does (``processExpired``, not
``processNonPersistent``). A message on a dead-letter queue or a temporary queue is dropped.

A message already expired when its SEND arrives is never stored (persistent ones are stored in
the dead-letter queue instead, where producer flow control bounds them like any SEND), so a
flood of them costs no memory. Messages waiting in a queue nobody consumes are swept:
``ExpiryWatch`` keeps when each stored message with an expiry passes and hands the broker the
due ones, at most once per ``SWEEP_INTERVAL_S``. See docs/stomp.md, "Expiry".
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable, Iterable

from primacy.broker import codes
from primacy.broker.refusals import Refused

EXPIRES_HEADER = "expires"
PERSISTENT_HEADER = "persistent"
# Sweeps of expired waiting messages come at most this often (a flood costs one sweep a
# second, not one per message); delivery checks every message whatever the sweep.
SWEEP_INTERVAL_S = 0.5


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def expires_at_ms(headers: Iterable[tuple[str, str]]) -> int | None:
    """When a stored message expires (ms since the epoch), or None if it never does (a value
    SEND would refuse, journaled before it did, is taken for never)."""
    for name, value in headers:
        if name == EXPIRES_HEADER:
            return int(value) or None if value.isascii() and value.isdigit() else None
    return None


def has_expired(headers: Iterable[tuple[str, str]]) -> bool:
    """Whether a message with these headers is past its ``expires`` now."""
    expires_ms = expires_at_ms(headers)
    return expires_ms is not None and expires_ms <= now_ms()


def parse_expires(value: str) -> int | None:
    """A SEND's ``expires`` value; Refused unless it is a whole number of ms (0: never)."""
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        raise Refused(
            codes.BAD_REQUEST,
            f"expires {value[:32]!r} is not a time in ms since the Unix epoch (0: never)",
        )
    return int(value) or None


def expired_on_arrival(expires_ms: int | None) -> bool:
    return expires_ms is not None and expires_ms <= now_ms()


def is_persistent(headers: Iterable[tuple[str, str]]) -> bool:
    """``persistent:true``: ActiveMQ moves such a message to the dead-letter queue on expiry."""
    return any(name == PERSISTENT_HEADER and value == "true" for name, value in headers)


def without_expiry(headers: dict[str, str]) -> dict[str, str]:
    """A dead-letter copy's headers: it must not expire again where it goes."""
    return {name: value for name, value in headers.items() if name != EXPIRES_HEADER}


class ExpiryWatch:
    """When each stored message with an expiry passes it; ``on_due`` gets the orders of the
    messages that did, per destination, on the loop.

    ``live`` maps a tracked message's (order, destination) to its expiry (a topic message's
    copies for its durable subscriptions share its order, one entry each); a settled message is
    forgotten at once and its heap entry dropped lazily, the heap rebuilt once more than half
    of it is stale, so it holds at most twice the messages still waiting with an expiry.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_due: Callable[[dict[str, set[int]]], None],
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._loop = loop
        self._on_due = on_due
        self._clock = clock
        self._heap: list[tuple[int, int, str]] = []  # (expires_ms, order, destination)
        self.live: dict[tuple[int, str], int] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at_ms: int | None = None
        self._last_sweep = float("-inf")

    def track(self, order: int, destination: str, expires_ms: int) -> None:
        self.live[(order, destination)] = expires_ms
        heapq.heappush(self._heap, (expires_ms, order, destination))
        self._schedule()

    def forget(self, order: int, destination: str) -> None:
        forgotten = self.live.pop((order, destination), None) is not None
        if forgotten and len(self._heap) > 2 * len(self.live) + 64:
            self._heap = [(at, order, queue) for (order, queue), at in self.live.items()]
            heapq.heapify(self._heap)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self) -> None:
        if not self._heap:
            return
        first = self._heap[0][0]
        if self._timer is not None and self._timer_at_ms is not None and self._timer_at_ms <= first:
            return
        if self._timer is not None:
            self._timer.cancel()
        earliest = self._last_sweep + SWEEP_INTERVAL_S
        delay_s = max((first - self._clock()) / 1000, earliest - self._loop.time(), 0.0)
        self._timer_at_ms = first
        self._timer = self._loop.call_later(delay_s, self._sweep)

    def _sweep(self) -> None:
        self._timer = self._timer_at_ms = None
        self._last_sweep = self._loop.time()
        now = self._clock()
        due: dict[str, set[int]] = {}
        while self._heap and self._heap[0][0] <= now:
            _, order, destination = heapq.heappop(self._heap)
            if self.live.pop((order, destination), None) is not None:
                due.setdefault(destination, set()).add(order)
        if due:
            self._on_due(due)
        self._schedule()
