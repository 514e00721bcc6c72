"""How long this process's garbage collections have held the interpreter: a running total.

A collection holds the interpreter lock from start to end. The lease check's thread cannot
report meanwhile, nor can the role loop look at its timers, so a check the share answered in
a millisecond reaches the role machine as late as the collection made it. The machine does
not count that time against the share (``Tick.collecting_s``): measured here, by the
interpreter's own ``gc.callbacks``, it is known, not guessed.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any


class CollectorTime:
    """Adds up, on ``clock`` (the role machine's), the time of every collection while
    ``install``ed."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.total_s = 0.0
        self._clock = clock
        self._started_at = 0.0

    def install(self) -> None:
        if self._on_collection not in gc.callbacks:
            gc.callbacks.append(self._on_collection)

    def uninstall(self) -> None:
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        # Runs inside the collection, on whichever thread it interrupted: no locks taken here
        # (one the interrupted thread holds would deadlock), a float read and written.
        # Collections never overlap, so ``_started_at`` belongs to this one.
        if phase == "start":
            self._started_at = self._clock()
        else:
            self.total_s += self._clock() - self._started_at
