"""Producers and consumers through failovers of real supervisors: nothing acknowledged is lost.

After each run: every message whose RECEIPT arrived was consumed, and the
journal stores no message id twice.
"""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from client.consumer import Consumer
from client.producer import Producer
from locker.lockfile import LOCK_FILE_NAME
from store import tools
from supervisor.localgroup import free_port
from tests.harness.group import Group, NodeProcess, wait_until

pytestmark = pytest.mark.slow
QUEUE = "/queue/orders"


class StompGroup:
    """A group whose nodes keep their STOMP port across restarts, and its failover URL."""

    def __init__(self, group: Group, count: int, *extra: str) -> None:
        self.group = group
        self.extra = extra
        self.stomp_ports = {f"n{i}": free_port() for i in range(1, count + 1)}
        for node_id in self.stomp_ports:
            self.start(node_id)
        addresses = ",".join(f"tcp://127.0.0.1:{port}" for port in self.stomp_ports.values())
        self.url = (
            f"failover:({addresses})?initialReconnectDelay=10&maxReconnectDelay=100&randomize=false"
        )

    def start(self, node_id: str) -> NodeProcess:
        port = self.stomp_ports[node_id]
        return self.group.start(node_id, "--stomp", f"127.0.0.1:{port}", *self.extra)


class Traffic:
    """Producers and one consumer running in threads; what each saw."""

    def __init__(self, url: str, producers: int, messages_each: int = 5000) -> None:
        self.url = url
        self.stop_producing = threading.Event()
        self.acknowledged: set[str] = set()
        self.consumed: collections.Counter[str] = collections.Counter()
        self.errors: list[BaseException] = []
        self._stop_consuming = threading.Event()
        self._lock = threading.Lock()
        self._producers = [
            threading.Thread(target=self._guard(self._produce, messages_each))
            for _ in range(producers)
        ]
        self._consumer = threading.Thread(target=self._guard(self._consume))

    def __enter__(self) -> Traffic:
        for thread in (*self._producers, self._consumer):
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.drain()

    def drain(self) -> None:
        """Stop and wait for the producers, then until the consumer saw all acknowledged."""
        self.stop_producing.set()
        for thread in self._producers:
            thread.join(120)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.acknowledged <= set(self.consumed):
            time.sleep(0.1)
        self._stop_consuming.set()
        self._consumer.join(30)

    def _guard(self, work: Callable[..., None], *args: object) -> Callable[[], None]:
        def run() -> None:
            try:
                work(*args)
            except BaseException as exc:  # reported by the test, not lost in a thread
                self.errors.append(exc)

        return run

    def _produce(self, count: int) -> None:
        producer = Producer(self.url, window=4, receipt_timeout_s=3.0)
        sent: list[str] = []
        try:
            for number in range(count):
                if self.stop_producing.is_set():
                    break
                sent.append(producer.send(QUEUE, f"payload {number}".encode()))
                self._note_receipted(producer, sent)
                time.sleep(0.02)  # steady traffic across the failovers, not volume
            producer.flush()
            self._note_receipted(producer, sent)
        finally:
            producer.close()

    def _note_receipted(self, producer: Producer, sent: list[str]) -> None:
        # Every id sent and no longer waiting for a receipt was acknowledged.
        waiting = {pending.message_id for pending in producer.unreceipted.values()}
        with self._lock:
            self.acknowledged.update(set(sent) - waiting)

    def _consume(self) -> None:
        consumer = Consumer(self.url, QUEUE, receipt_timeout_s=3.0)
        try:
            while not self._stop_consuming.is_set():
                message = consumer.receive(0.2)
                if message is None:
                    continue
                # Delivered to the application: consumed, whether or not the ACK's receipt
                # survives a failover (a lost ACK means a redelivery, counted again).
                with self._lock:
                    self.consumed[message.message_id] += 1
                consumer.ack(message)
        finally:
            consumer.close()


def _stored_send_counts(share: Path) -> collections.Counter[str]:
    records: list[dict[str, object]] = []
    tools.dump(share, records.append)
    return collections.Counter(str(r["message_id"]) for r in records if r["type"] == "SEND")


def _journal_story(share: Path, message_ids: set[str]) -> list[str]:
    """What the journal holds for these ids, fenced records included: for failure messages."""
    records: list[dict[str, object]] = []
    tools.dump(share, records.append)
    story = [
        f"{r['type']} {r['message_id']} epoch {r['epoch']} seq {r['sequence']}"
        for r in records
        if r.get("message_id") in message_ids
    ]
    return story[:20]


def check_no_loss(traffic: Traffic, share: Path) -> None:
    assert traffic.errors == []
    lost = traffic.acknowledged - set(traffic.consumed)
    assert lost == set(), (
        f"{len(lost)} acknowledged messages never consumed; journal: {_journal_story(share, lost)}"
    )
    stored = _stored_send_counts(share)
    assert [mid for mid, count in stored.items() if count > 1] == []
    assert traffic.acknowledged <= set(stored)


def test_repeated_sigkill_of_the_master_loses_no_acknowledged_message(
    group: Group, share: Path
) -> None:
    stomp = StompGroup(group, 3)
    group.wait_for_master(timeout_s=30)
    with Traffic(stomp.url, producers=2) as traffic:
        for _ in range(4):
            time.sleep(0.8)
            wait_until(
                lambda: sum(n.status("/health") == 200 for n in group.alive()) >= 2,
                30,
                "two running nodes",
            )
            master = group.wait_for_master(timeout_s=30)
            master.signal(signal.SIGKILL)
            master.process.wait(10)
            stomp.start(master.node_id)
        time.sleep(0.8)  # traffic on the last master too
    check_no_loss(traffic, share)
    assert len(traffic.acknowledged) > 100


def test_a_frozen_master_whose_lock_was_replaced_loses_nothing_when_it_resumes(
    group: Group, share: Path
) -> None:
    stomp = StompGroup(group, 2)
    old = group.wait_for_master(timeout_s=30)
    with Traffic(stomp.url, producers=2) as traffic:
        time.sleep(0.5)
        old.signal(signal.SIGSTOP)
        (share / "replacement").write_text("")
        os.replace(share / "replacement", share / LOCK_FILE_NAME)
        group.wait_for_master(timeout_s=30, exclude={old.node_id})
        time.sleep(1.0)  # the new master serves while the old one is frozen
        old.signal(signal.SIGCONT)
        wait_until(lambda: "PRIMACY-1003" in old.log(), 15, "the old master to demote")
        time.sleep(0.5)
    check_no_loss(traffic, share)
    assert len(traffic.acknowledged) > 50
