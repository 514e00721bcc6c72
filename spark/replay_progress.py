"""Progress lines while the replay runs: one per step, and Spark stage progress in between."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO


class Progress:
    """Prints ``[i/n] step`` lines; while a step runs, a thread it owns polls Spark's stages.

    The poller is started by ``step`` and stopped and joined before ``step``
    returns, so nothing is left running between steps or after the job.
    """

    def __init__(
        self,
        context: Any,
        total_steps: int,
        out: TextIO = sys.stderr,
        poll_interval_s: float = 2.0,
        enabled: bool = True,
    ) -> None:
        self._tracker = context.statusTracker()
        self._total = total_steps
        self._out = out
        self._poll_interval_s = poll_interval_s
        self._enabled = enabled
        self._done = 0

    def say(self, text: str) -> None:
        if self._enabled:
            print(f"replay: {text}", file=self._out, flush=True)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self._done += 1
        self.say(f"[{self._done}/{self._total}] {name} ...")
        started = time.monotonic()
        stop = threading.Event()
        poller = threading.Thread(target=self._poll, args=(stop,), name="replay-progress")
        if self._enabled:
            poller.start()
        try:
            yield
        finally:
            stop.set()
            if poller.is_alive():
                poller.join()
        self.say(f"[{self._done}/{self._total}] {name} done in {time.monotonic() - started:.1f} s")

    def _poll(self, stop: threading.Event) -> None:
        last: dict[int, int] = {}
        while not stop.wait(self._poll_interval_s):
            for stage_id in self._tracker.getActiveStageIds():
                info = self._tracker.getStageInfo(stage_id)
                if info is None or last.get(stage_id) == info.numCompletedTasks:
                    continue
                last[stage_id] = info.numCompletedTasks
                self.say(
                    f"    stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks done, "
                    f"{info.numActiveTasks} running"
                )
