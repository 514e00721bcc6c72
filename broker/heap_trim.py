"""Memory given back after a burst: glibc's ``malloc_trim(0)`` once the broker is quiet.

A message's body (1 KiB and up) is above pymalloc's 512-byte limit, so it lives on
glibc's heap. A backlog of them, acknowledged in another order than it came, leaves the
heap a sieve: free pages between live blocks, which glibc keeps as the process's RSS
(issue 49: a master at 200 MiB after the throughput rounds, a slave at 59). glibc gives
the top of its heap back by itself, the holes only when asked: ``malloc_trim(0)``
releases every free page of every arena (``madvise``). It walks the heap, so it runs
on a thread of its own (ctypes lets go of the interpreter's lock), once per quiet spell
after traffic, never while messages flow.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger("primacy.broker")


def glibc_malloc_trim() -> Callable[[], int] | None:
    """``malloc_trim(0)`` of this process's glibc, or None where the C library is another."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
    except (ValueError, OSError):
        return None
    trim = ctypes.CDLL(None).malloc_trim
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: int(trim(0))


class HeapTrim:
    """Every ``idle_s`` on the loop, look at ``activity()`` (a count that moves with
    traffic); once it stopped moving after it moved, trim on a thread, once."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, activity: Callable[[], int], idle_s: float
    ) -> None:
        self._loop = loop
        self._activity = activity
        self._idle_s = idle_s
        self._trim = glibc_malloc_trim()
        self._seen = activity()
        self._moved = False
        self._handle: asyncio.TimerHandle | None = None
        self.trims = 0  # trims finished (on their thread)

    def start(self) -> None:
        if self._trim is not None and self._idle_s > 0:
            self._handle = self._loop.call_later(self._idle_s, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        now = self._activity()
        if now != self._seen:
            self._seen, self._moved = now, True
        elif self._moved:
            self._moved = False
            threading.Thread(target=self._run, name="primacy-heap-trim", daemon=True).start()
        self._handle = self._loop.call_later(self._idle_s, self._tick)

    def _run(self) -> None:
        assert self._trim is not None
        released = self._trim()
        self.trims += 1
        log.debug(
            "malloc_trim(0) after a quiet %.1f s: %s",
            self._idle_s,
            "memory given back" if released else "nothing to give back",
        )
