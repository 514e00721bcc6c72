"""Producers and a consumer with failover URLs against a group of real nodes, and what they saw.

``Traffic`` runs producer threads and one consumer thread through whatever
happens to the group (kills, partitions, a full share), and records every
message id sent, every one acknowledged (RECEIPT) with the wall-clock time the
producer noticed it, every delivery to the consumer, and every error a
producer was told about. ``tests/harness/checker.py`` judges it against the
journal.

With ``durable_topic`` a durable topic subscription (client-id and
``activemq.subscriptionName``) is begun before any traffic, a producer thread sends to
the topic, and a failover consumer of that subscription counts what it gets with the
queue's consumer: every receipted topic message is owed to it, through every fault.

With ``request_reply`` a requester and a replier (tests/harness/request_reply.py) run
alongside: every receipted request is owed to the replier like a queue message, and every
request is answered once the faults are over (re-issued when its reply went to a temporary
queue that failed over with its connection).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable

from primacy.cli.localgroup import NodeProcess, free_port
from primacy.client.consumer import Consumer
from primacy.client.errors import BrokerRefused
from primacy.client.failover import Failover
from primacy.client.producer import Producer
from tests.harness.request_reply import Requester, replier

QUEUE = "/queue/orders"
TOPIC = "/topic/ledger"
DURABLE_CLIENT_ID = "chaos-books"
DURABLE_HEADERS = {"activemq.subscriptionName": "audit"}
_PRODUCER_JOIN_S = 120.0
_CONSUMER_CATCH_UP_S = 60.0


class _Collect(logging.Handler):
    """Keeps the message of every warning the client logs."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self._into = into

    def emit(self, record: logging.LogRecord) -> None:
        self._into.append(record.getMessage())


class StompPorts:
    """Fixed STOMP ports per node id (kept across restarts) and the failover URL over them.

    A port is picked free but bound only while its node is master, so another process
    on ``host`` may take it meanwhile, and this group's clients would then talk to that
    process's broker. Groups that run side by side (bench/chaos.py's trials) each give
    their own ``host`` (every 127.x.y.z is loopback on Linux), so they never share one.
    """

    def __init__(self, node_ids: Iterable[str], host: str = "127.0.0.1") -> None:
        self.host = host
        self.ports = {node_id: free_port(host) for node_id in node_ids}
        addresses = ",".join(f"tcp://{host}:{port}" for port in self.ports.values())
        self.url = (
            f"failover:({addresses})?initialReconnectDelay=10&maxReconnectDelay=100&randomize=false"
        )
        self.node_of_port = {port: node_id for node_id, port in self.ports.items()}

    def args(self, node_id: str) -> tuple[str, ...]:
        """The supervisor arguments that serve STOMP on this node's port."""
        return ("--stomp", f"{self.host}:{self.ports[node_id]}")


class StompGroup:
    """Nodes n1..nN started by ``start(node_id, *args)``, each on its fixed STOMP port."""

    def __init__(
        self,
        start: Callable[..., NodeProcess],
        count: int,
        *extra: str,
        start_now: bool = True,
        stomp_host: str = "127.0.0.1",
    ) -> None:
        self._start = start
        self.extra = extra
        self.stomp = StompPorts((f"n{i}" for i in range(1, count + 1)), stomp_host)
        self.url = self.stomp.url
        self.nodes: dict[str, NodeProcess] = {}
        if start_now:
            for node_id in self.stomp.ports:
                self.start(node_id)

    def start(self, node_id: str) -> NodeProcess:
        node = self._start(node_id, *self.stomp.args(node_id), *self.extra)
        self.nodes[node_id] = node
        return node


class Traffic:
    """Producer threads and one consumer thread; what each saw. A context manager."""

    def __init__(
        self,
        url: str,
        producers: int,
        messages_each: int = 5000,
        *,
        interval_s: float = 0.02,
        receipt_timeout_s: float = 3.0,
        durable_topic: bool = False,
        request_reply: bool = False,
    ) -> None:
        self.url = url
        self.durable_topic = durable_topic
        self.interval_s = interval_s
        self.receipt_timeout_s = receipt_timeout_s
        self.stop_producing = threading.Event()
        self.sent: set[str] = set()
        self.topic_sent: set[str] = set()  # the ids of ``sent`` sent to the topic
        self.acknowledged: set[str] = set()
        # Wall-clock ns at which a producer noticed the RECEIPT (at or after its arrival).
        self.receipt_times_ns: dict[str, int] = {}
        self.consumed: collections.Counter[str] = collections.Counter()
        self.errors: list[BaseException] = []
        # What the failover client was told when it lost a broker (ERROR frames included).
        self.failover_reasons: list[str] = []
        self._log_handler = _Collect(self.failover_reasons)
        self._stop_consuming = threading.Event()
        self._lock = threading.Lock()
        self._producers = [
            threading.Thread(target=self._guard(self._produce, messages_each), name=f"producer-{i}")
            for i in range(producers)
        ]
        self._consumer = threading.Thread(target=self._guard(self._consume), name="consumer")
        self._consumers = [self._consumer]
        if durable_topic:
            self._producers.append(
                threading.Thread(
                    target=self._guard(self._produce, messages_each, TOPIC), name="topic-producer"
                )
            )
            self._consumers.append(
                threading.Thread(target=self._guard(self._consume_durable), name="durable")
            )
        self._producer_clients: list[Producer] = []
        self.requester: Requester | None = None
        self.request_ids: set[str] = set()  # the ids of ``sent`` that are requests
        if request_reply:
            self._add_request_reply()

    def __enter__(self) -> Traffic:
        logging.getLogger("primacy.client").addHandler(self._log_handler)
        if self.durable_topic:
            self._begin_durable_subscription()
        for thread in (*self._producers, *self._consumers):
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.drain()

    @property
    def resent(self) -> int:
        return sum(p.resent for p in self._producer_clients)

    def drain(self) -> None:
        """Stop and wait for the producers, then until the consumer saw all acknowledged."""
        self.stop_producing.set()
        for thread in self._producers:
            thread.join(_PRODUCER_JOIN_S)
        deadline = time.monotonic() + _CONSUMER_CATCH_UP_S
        while time.monotonic() < deadline and not self.acknowledged <= set(self.consumed):
            time.sleep(0.1)
        self._stop_consuming.set()
        for consumer in self._consumers:
            consumer.join(30)
        logging.getLogger("primacy.client").removeHandler(self._log_handler)

    def wait_for_acknowledged(self, count: int, timeout_s: float) -> bool:
        """True once ``count`` more messages than now are acknowledged (False on timeout)."""
        target = len(self.acknowledged) + count
        deadline = time.monotonic() + timeout_s
        while len(self.acknowledged) < target:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def _guard(self, work: Callable[..., None], *args: object) -> Callable[[], None]:
        def run() -> None:
            try:
                work(*args)
            except BaseException as exc:  # reported by the checker, not lost in a thread
                self.errors.append(exc)

        return run

    def _produce(self, count: int, destination: str = QUEUE) -> None:
        producer = Producer(self.url, window=4, receipt_timeout_s=self.receipt_timeout_s)
        self._producer_clients.append(producer)
        sent: list[str] = []
        try:
            for number in range(count):
                if self.stop_producing.is_set():
                    break
                message_id = producer.send(destination, f"payload {number}".encode())
                sent.append(message_id)
                with self._lock:
                    self.sent.add(message_id)
                    if destination == TOPIC:
                        self.topic_sent.add(message_id)
                self._note_receipted(producer, sent)
                time.sleep(self.interval_s)  # steady traffic across the faults, not volume
            producer.flush()
            self._note_receipted(producer, sent)
        finally:
            producer.close()

    def _note_receipted(self, producer: Producer, sent: list[str]) -> None:
        # Every id sent and no longer waiting for a receipt was acknowledged.
        waiting = {pending.message_id for pending in producer.unreceipted.values()}
        now_ns = time.time_ns()
        with self._lock:
            for message_id in set(sent) - waiting - self.acknowledged:
                self.acknowledged.add(message_id)
                self.receipt_times_ns[message_id] = now_ns

    def _add_request_reply(self) -> None:
        def sent(message_id: str) -> None:
            with self._lock:
                self.sent.add(message_id)
                self.request_ids.add(message_id)

        def receipted(message_id: str) -> None:
            with self._lock:
                self.acknowledged.add(message_id)
                self.receipt_times_ns[message_id] = time.time_ns()

        def delivered(message_id: str) -> None:
            with self._lock:
                self.consumed[message_id] += 1

        self.requester = Requester(
            self.url,
            stop=self.stop_producing,
            on_sent=sent,
            on_receipted=receipted,
            interval_s=self.interval_s,
            receipt_timeout_s=self.receipt_timeout_s,
        )
        self._producers.append(
            threading.Thread(target=self._guard(self.requester.run), name="requester")
        )
        answer = self._guard(
            replier,
            self.url,
            self._stop_consuming,
            delivered,
            self.receipt_timeout_s,
        )
        self._consumers.append(threading.Thread(target=answer, name="replier"))

    def _begin_durable_subscription(self) -> None:
        """SUBSCRIBE durably and wait for its RECEIPT: from then on the subscription keeps
        every topic message, whoever is master."""
        failover = Failover(self.url, client_id=DURABLE_CLIENT_ID)
        try:
            connection = failover.current()
            headers = {"id": "begin", "destination": TOPIC, "receipt": "begun"}
            connection.send("SUBSCRIBE", {**headers, **DURABLE_HEADERS})
            reply = connection.read(30)
            if reply is None or reply.command != "RECEIPT":
                raise AssertionError(f"the durable SUBSCRIBE was not receipted: {reply}")
        finally:
            failover.close()

    def _consume_durable(self) -> None:
        while not self._stop_consuming.is_set():
            try:
                self._consume(TOPIC, client_id=DURABLE_CLIENT_ID, headers=DURABLE_HEADERS)
            except BrokerRefused as refused:
                # A master that has not yet seen this client's previous connection end keeps
                # it as the subscriber (PRIMACY-1561), as ActiveMQ keeps a client id: retry.
                self.failover_reasons.append(str(refused))
                time.sleep(0.2)

    def _consume(
        self,
        destination: str = QUEUE,
        client_id: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        settings = {"client_id": client_id} if client_id is not None else {}
        consumer = Consumer(
            self.url,
            destination,
            receipt_timeout_s=self.receipt_timeout_s,
            subscribe_headers=headers,
            **settings,
        )
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
