"""The dedupe window's worst add: store/dedupe_window.py against the ``OrderedDict`` it
replaced, one in and one out per message, in the same run.

Run: ``.venv/bin/python bench/dedupe_window.py [--messages N] [--window N]``.
Each new id goes through ``JournalState.apply`` (a SEND then its ACK, as the writer
applies a commit) with the window in place, then the same ids through an ``OrderedDict``
window as ``apply`` kept it before issue 49. Prints the p99 and the max of one SEND's
apply per 100 000 messages, and the slowest of all: a rebuild of the window's table shows
as a max of tens of ms. Asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primacy.store.dedupe_window import DedupeWindow
from primacy.store.format import RecordType
from primacy.store.state import JournalState


def timings(messages: int, add: Callable[[int], None]) -> list[float]:
    """Each add's CPU time (this thread's), so that a shared machine's preemptions do not
    pass for stalls: a table rebuilt is CPU spent in the add, a preemption is not."""
    times = []
    clock = time.thread_time_ns
    for n in range(messages):
        started = clock()
        add(n)
        times.append((clock() - started) / 1e9)
    return times


def with_window(window: int) -> Callable[[int], None]:
    seen = DedupeWindow(window)

    def add(n: int) -> None:
        key = ("/queue/a", f"id-{n:012d}")
        if key not in seen:
            seen.add(key, n + 1)

    return add


def with_state(window: int) -> Callable[[int], None]:
    state = JournalState(window)

    def add(n: int) -> None:
        state.apply(RecordType.SEND, n + 1, "/queue/a", f"id-{n:012d}", "s", 0)
        state.apply(RecordType.ACK, n + 1, "/queue/a", f"id-{n:012d}", "s", 0)

    return add


def with_ordered_dict(window: int) -> Callable[[int], None]:
    seen: OrderedDict[tuple[str, str], int] = OrderedDict()

    def add(n: int) -> None:
        key = ("/queue/a", f"id-{n:012d}")
        if key not in seen:
            seen[key] = n + 1
            if len(seen) > window:
                seen.popitem(last=False)

    return add


def report(name: str, times: list[float], step: int) -> None:
    print(f"{name}: per {step:,} messages, p99 / max of one add (ms of CPU)")
    for start in range(0, len(times), step):
        part = sorted(times[start : start + step])
        p99 = part[int(len(part) * 0.99)] * 1e3
        print(f"  {start + step:>9,}: {p99:6.3f} / {part[-1] * 1e3:7.2f}")
    print(
        f"  slowest of all: {max(times) * 1e3:.2f} ms; mean {statistics.fmean(times) * 1e6:.2f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=100_000)
    args = parser.parse_args()
    gc.disable()  # the collector's own pauses are not the window's
    report("the DedupeWindow alone", timings(args.messages, with_window(args.window)), 100_000)
    report(
        "JournalState.apply (SEND then ACK) with DedupeWindow",
        timings(args.messages, with_state(args.window)),
        100_000,
    )
    report(
        "the OrderedDict window alone (before)",
        timings(args.messages, with_ordered_dict(args.window)),
        100_000,
    )


if __name__ == "__main__":
    main()
