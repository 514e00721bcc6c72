"""What one topic message costs the broker's loop per non-durable subscriber, against queueing
one message on a queue (the baseline, measured in the same run), and the longest turn of the
loop the fan-out takes (``broker/topics.py`` offers ``FAN_OUT_SLICE`` copies a turn).

Only the books: no sockets, no frames (delivering each copy is a MESSAGE frame, as for a queue).

    python bench/topic_fanout.py --subscribers 10000 --messages 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primacy.broker.queues import AckMode, QueueBook, QueuedMessage, Subscription
from primacy.broker.topics import FAN_OUT_SLICE, Topics


def fan_out(subscribers: int, messages: int) -> tuple[float, float]:
    """(seconds a message, longest turn in seconds) for ``messages`` to ``subscribers``."""
    book = QueueBook()
    turns: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
    loop = SimpleNamespace(call_soon=lambda callback, *args: turns.append((callback, args)))
    broker: Any = SimpleNamespace(
        book=book, schedule_dispatch=lambda _: None, loop=loop, failure=None
    )
    topics = Topics({})
    for number in range(subscribers):
        subscription = Subscription(object(), f"s{number}", "/topic/t", AckMode.AUTO, 1000)
        topics.attach(broker, subscription, None, None)
        book.subscribe(subscription)
    body = b"x" * 1024
    longest = 0.0
    started = time.perf_counter()
    for number in range(messages):
        topics.publish(broker, QueuedMessage(number, "/topic/t", f"m{number}", (), body), ())
        while turns:
            callback, args = turns.pop(0)
            turn = time.perf_counter()
            callback(*args)
            longest = max(longest, time.perf_counter() - turn)
    return (time.perf_counter() - started) / messages, longest


def queue_add(messages: int) -> float:
    """Seconds to make one message and queue it (the baseline)."""
    book = QueueBook()
    body = b"x" * 1024
    started = time.perf_counter()
    for number in range(messages):
        book.add(QueuedMessage(number, "/queue/q", f"m{number}", (), body))
    return (time.perf_counter() - started) / messages


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    per_copy, turns, baseline = [], [], []
    for _ in range(args.rounds):
        seconds, longest = fan_out(args.subscribers, args.messages)
        per_copy.append(seconds / args.subscribers)
        turns.append(longest)
        baseline.append(queue_add(args.subscribers * args.messages))
    copy_us, base_us = statistics.median(per_copy) * 1e6, statistics.median(baseline) * 1e6
    print(f"subscribers {args.subscribers}, messages {args.messages}, rounds {args.rounds}")
    print(f"queue one message (baseline): {base_us:.2f} us")
    print(f"topic: a copy per subscriber: {copy_us:.2f} us ({copy_us / base_us:.2f}x the baseline)")
    print(f"a message to all: {copy_us * args.subscribers / 1000:.1f} ms of the loop, in turns of")
    print(
        f"  {FAN_OUT_SLICE} copies; longest turn (median of rounds): "
        f"{statistics.median(turns) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
