"""The demo's clients: one producer and one consumer on the group's failover URL, in threads."""

from __future__ import annotations

import collections
import logging
import threading
from dataclasses import dataclass

from primacy.client.consumer import Consumer
from primacy.client.errors import ClientError
from primacy.client.producer import Producer

QUEUE = "/queue/demo"


@dataclass(frozen=True)
class TrafficCounts:
    sent: int
    acknowledged: int
    consumed: int
    lost: int
    duplicates: int
    failovers_seen: int


class DemoTraffic:
    """Sends a message every few milliseconds and consumes them, across failovers."""

    def __init__(self, url: str, interval_s: float = 0.01) -> None:
        self._url = url
        self._interval_s = interval_s
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._lock = threading.Lock()
        self._sent: list[str] = []
        self._acknowledged: set[str] = set()
        self._consumed: collections.Counter[str] = collections.Counter()
        self._failovers = 0
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def start(self) -> None:
        # The client logs each failover as a warning; the demo prints its own story.
        logging.getLogger("primacy.client").setLevel(logging.ERROR)
        for thread in self._threads:
            thread.start()

    def stop(self, drain_s: float = 15.0) -> TrafficCounts:
        """Stop sending, wait until everything acknowledged was consumed (or ``drain_s``)."""
        self._stop_producing.set()
        self._threads[0].join(30)
        pause = threading.Event()
        for _ in range(int(drain_s / 0.1)):
            with self._lock:
                if self._acknowledged <= set(self._consumed):
                    break
            pause.wait(0.1)
        self._stop_consuming.set()
        self._threads[1].join(10)
        with self._lock:
            return TrafficCounts(
                sent=len(self._sent),
                acknowledged=len(self._acknowledged),
                consumed=len(self._consumed),
                lost=len(self._acknowledged - set(self._consumed)),
                duplicates=sum(count - 1 for count in self._consumed.values()),
                failovers_seen=self._failovers,
            )

    def _produce(self) -> None:
        producer = Producer(self._url, window=1, receipt_timeout_s=3.0)
        try:
            while not self._stop_producing.wait(self._interval_s):
                # With a window of one, send() returns once the RECEIPT arrived,
                # resending through failovers until it does.
                message_id = producer.send(QUEUE, b"demo message")
                with self._lock:
                    self._sent.append(message_id)
                    self._acknowledged.add(message_id)
                    self._failovers = producer.failover.reconnects
        except ClientError as exc:
            print(f"   producer stopped: {exc}")
        finally:
            producer.close()

    def _consume(self) -> None:
        consumer = Consumer(self._url, QUEUE, receipt_timeout_s=3.0)
        try:
            while not self._stop_consuming.is_set():
                message = consumer.receive(0.2)
                if message is not None:
                    with self._lock:
                        self._consumed[message.message_id] += 1
                    consumer.ack(message)
        except ClientError as exc:
            print(f"   consumer stopped: {exc}")
        finally:
            consumer.close()
