"""Consume pace: ``primacy consume`` against stomp.py's own consumer, and an ACK's round trip.

The figures tests/client/test_ack_latency.py no longer asserts (a test checks behaviour:
Nagle off on both ends, one ACK in 32 asking for a receipt). One real node with its
built-in broker; in turns, a fresh queue of ``--messages`` is sent with ``primacy send``
and emptied by ``primacy consume`` or by stomp.py (client-individual ACKs, the last one
receipted); the median turn of each and their ratio are printed. Then, one message in
flight at a time (prefetch 1), the time from an ACK to its RECEIPT (the next MESSAGE goes
out with it): the median and the worst, in ms. Issue 45 item 4 measured 40-48 ms per ACK
with Nagle on at the broker, and consume 80 times slower than stomp.py.

    .venv/bin/python bench/consume_pace.py                  # 2000 messages, 3 turns each
    .venv/bin/python bench/consume_pace.py --messages 500 --turns 1

Asserts nothing; the node it starts is stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import stomp

from primacy.cli.localgroup import Group, free_port
from primacy.client.consumer import Consumer
from primacy.client.producer import Producer
from tests.harness.cli import primacy


def stomppy_consume(port: int, queue: str, count: int) -> float:
    """stomp.py's consumer: client-individual ACKs, the last one receipted; seconds taken."""
    received: list[str] = []  # ack ids, appended by stomp.py's receiver thread
    started = time.monotonic()
    connection = stomp.Connection12([("127.0.0.1", port)])

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            received.append(frame.headers["ack"])

    connection.set_listener("pace", Listener())
    connection.connect(wait=True)
    connection.subscribe(
        queue, "s", ack="client-individual", headers={"activemq.prefetchSize": "100"}
    )
    acked = 0
    while acked < count:
        if acked >= len(received):
            time.sleep(0.0005)
            continue
        ack_id = received[acked]
        acked += 1
        if acked == count:
            connection.ack(ack_id, receipt="last")
        else:
            connection.ack(ack_id)
    connection.disconnect()  # waits for its own receipt: every ACK before it is applied
    return time.monotonic() - started


def ack_round_trips_ms(url: str, count: int) -> list[float]:
    producer = Producer(url, window=20)
    for n in range(count):
        producer.send("/queue/rtt", f"m{n}".encode())
    producer.flush()
    producer.close()
    consumer = Consumer(url, "/queue/rtt", prefetch=1)
    waits_ms = []
    try:
        for _ in range(count):
            message = consumer.receive(timeout_s=5)
            assert message is not None
            started = time.monotonic()
            consumer.ack(message)
            waits_ms.append((time.monotonic() - started) * 1000)
    finally:
        consumer.close()
    return waits_ms


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=3, help="turns of each consumer")
    parser.add_argument("--round-trips", type=int, default=30)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="primacy-pace-"))
    (work / "share").mkdir()
    (work / "logs").mkdir()
    group = Group(work / "share", work / "logs")
    port = free_port()
    try:
        node = group.start("n1", "--stomp", f"127.0.0.1:{port}")
        deadline = time.monotonic() + 30
        while not node.is_master():
            if time.monotonic() > deadline:
                raise SystemExit("the node did not become master in 30 s")
            time.sleep(0.05)
        url = f"tcp://127.0.0.1:{port}"
        ours_s, theirs_s = [], []
        for turn in range(2 * args.turns):
            count = str(args.messages)
            sent = primacy("send", url, "/queue/pace", "--count", count, "--window", "100")
            if sent.returncode != 0:
                raise SystemExit(sent.stderr)
            if turn % 2:
                theirs_s.append(stomppy_consume(port, "/queue/pace", args.messages))
                continue
            consumed = primacy(
                "consume", url, "/queue/pace", "--count", count, "--quiet", "--json", timeout_s=300
            )
            if consumed.returncode != 0:
                raise SystemExit(consumed.stderr)
            ours_s.append(json.loads(consumed.stdout)["elapsed_s"])
        waits_ms = ack_round_trips_ms(url, args.round_trips)
    finally:
        group.close()
        shutil.rmtree(work, ignore_errors=True)
    ours, theirs = statistics.median(ours_s), statistics.median(theirs_s)
    print(
        f"{args.messages} messages, {args.turns} turns each: primacy consume {ours:.2f} s, "
        f"stomp.py {theirs:.2f} s (medians); ratio {ours / theirs:.2f}"
    )
    print(
        f"ACK to RECEIPT, one in flight ({args.round_trips}): median "
        f"{statistics.median(waits_ms):.1f} ms, worst {max(waits_ms):.1f} ms"
    )


if __name__ == "__main__":
    main()
