"""The STOMP workload run against both groups: receipted producers, a failover sender, a drain.

Every message carries a ``bench_id`` header unique in the whole run (and the
same value as ``message-id``, which primacy uses to drop resends); ActiveMQ
replaces ``message-id`` with its own, but keeps ``bench_id`` as a property,
so lost and duplicated messages are counted by ``bench_id`` for both.
Every SEND has ``persistent:true``: without it ActiveMQ stores STOMP
messages as non-persistent.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import stomp

from bench.activemq.brokers import CpuMeter
from bench.activemq.receipts import ReceiptListener
from primacy.client.producer import Producer

Address = tuple[str, int]
BODY = "p" * 1024  # 1 KiB
ID_HEADER = "bench_id"
# How the drain acknowledges: each message after counting it (``drain``, issue 47).
DRAIN_ACK = "client-individual"


def subscribe_acknowledging(
    connection: stomp.Connection12, queue: str, subscription: str, prefetch: int
) -> None:
    """Subscribe so that each message is acknowledged on its own, once the caller has
    counted it (``acknowledge``): ``ack:client-individual``. With ``ack:auto`` a broker
    acknowledges a message as it sends it, so the messages a failover caught in a
    consumer's socket are acknowledged and never read (issue 47); unacknowledged ones
    come back (redelivered) instead. ``prefetch`` is ActiveMQ's header; primacy reads it too."""
    connection.subscribe(
        queue, id=subscription, ack=DRAIN_ACK, headers={"activemq.prefetchSize": str(prefetch)}
    )


def acknowledge(connection: stomp.Connection12, ack_id: str) -> None:
    """Acknowledge a message already counted; a connection already gone is no error (the
    broker delivers the message again). Not from stomp.py's listener thread on a TLS
    connection: its I/O thread would block putting the ACK to itself (see ``drain``)."""
    try:
        connection.ack(ack_id)
    except (OSError, stomp.exception.StompException):
        pass


def connection_to(address: Address, tls_ca: str | None = None) -> stomp.Connection12:
    """A stock stomp.py 1.2 connection; over TLS, trusting ``tls_ca``, when given one."""
    connection = stomp.Connection12([address])
    if tls_ca is not None:
        connection.set_ssl(for_hosts=[address], ca_certs=tls_ca)
    return connection


def receipted_headers(bench_id: str) -> dict[str, str]:
    """A persistent SEND's headers: a receipt, and ``bench_id`` as its id for both brokers."""
    return {"receipt": bench_id, "message-id": bench_id, ID_HEADER: bench_id, "persistent": "true"}


def producer_loop(
    address: Address,
    queue: str,
    tag: str,
    stop: Any,
    counts: Any,
    slot: int,
    tls_ca: str | None = None,
) -> None:
    """One producer process: send until stopped, awaiting each RECEIPT; counts[slot] = receipts."""
    listener = ReceiptListener()
    connection = connection_to(address, tls_ca)
    connection.set_listener("bench", listener)
    connection.connect(wait=True)
    number = 0
    while not stop.is_set():
        number += 1
        bench_id = f"{tag}-{slot}-{number}"
        connection.send(queue, BODY, headers=receipted_headers(bench_id))
        if not listener.receipts.acquire(timeout=30):
            raise RuntimeError(f"no receipt from {address} within 30 s")
        if listener.errors:
            raise RuntimeError(f"ERROR from {address}: {listener.errors[0]}")
        counts[slot] += 1
    connection.disconnect()


def throughput(
    address: Address,
    queue: str,
    tag: str,
    producers: int,
    seconds: float,
    warmup_s: float = 2.0,
    tls_ca: str | None = None,
    meter: CpuMeter | None = None,
) -> float:
    """Receipted messages per second over ``seconds``, ``producers`` processes sending at once;
    ``meter`` (if given) measures the broker's CPU over the same window.

    Producers are separate processes, as real clients would be, so that they
    do not share an interpreter lock with each other or with the harness.
    Counting starts ``warmup_s`` after every producer got its first RECEIPT.
    """
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    counts = context.Array("q", producers, lock=False)
    processes = [
        context.Process(
            target=producer_loop,
            args=(address, queue, tag, stop, counts, slot, tls_ca),
            daemon=True,
        )
        for slot in range(producers)
    ]
    try:
        for process in processes:
            process.start()
        # Spawning 8 interpreters on 2 cores takes seconds: count only once all are sending.
        deadline = time.monotonic() + 120
        while not all(counts[slot] for slot in range(producers)):
            if time.monotonic() > deadline or not all(p.is_alive() for p in processes):
                raise RuntimeError(f"producers against {address} did not all start sending")
            time.sleep(0.05)
        time.sleep(warmup_s)
        if meter is not None:
            meter.start()
        start_count, start = sum(counts), time.monotonic()
        time.sleep(seconds)
        done, elapsed = sum(counts) - start_count, time.monotonic() - start
        if meter is not None:
            meter.stop(done)
        stop.set()
        for process in processes:
            process.join(30)
        failed = [process.exitcode for process in processes if process.exitcode != 0]
        if failed:
            raise RuntimeError(f"{len(failed)} producer(s) against {address} failed: {failed}")
        return done / elapsed
    finally:
        for process in processes:  # on any failure or Ctrl-C: by pid, never left behind
            if process.is_alive():
                process.kill()
                process.join(10)


def drain(
    address: Address | Callable[[], Address],
    queue: str,
    idle_s: float = 2.0,
    limit_s: float = 300.0,
    tls_ca: str | None = None,
    on_reconnect: Callable[[Address], None] | None = None,
) -> Counter[str]:
    """Consume everything in ``queue``; returns deliveries per ``bench_id``.

    Stops once nothing arrived for ``idle_s`` on an open connection (or after ``limit_s``).
    ``address`` may be a function giving the master's address now: a connection the broker
    drops (a failover during the drain) is then opened again there, and the messages the
    failover interrupted are drained, not counted lost.

    Each message is acknowledged after it is counted (``subscribe_acknowledging``): issue
    47 traced the 1 250 and 1 652 "lost" messages of two heavy-traffic runs to an
    ``ack:auto`` drain whose connection a failover cut, none lost by a broker.
    """
    resolve = address if callable(address) else (lambda: address)
    delivered: Counter[str] = Counter()
    lock = threading.Lock()
    last = [time.monotonic()]
    dropped = threading.Event()
    to_ack: list[tuple[Any, str]] = []

    def send_acks(current: Any) -> None:
        with lock:
            pending = to_ack[:]
            to_ack.clear()
        for connection_of, ack_id in pending:
            if connection_of is current:  # else gone: the broker delivers it again
                acknowledge(current, ack_id)

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def __init__(self, connection: stomp.Connection12) -> None:
            self.connection = connection

        def on_message(self, frame: Any) -> None:
            with lock:
                delivered[frame.headers.get(ID_HEADER, "?")] += 1
                last[0] = time.monotonic()
                # Counted first; acknowledged from the drain's own thread (``acknowledge``
                # says why not from here).
                to_ack.append((self.connection, frame.headers["ack"]))

        def on_disconnected(self) -> None:
            dropped.set()

    def subscribed(to: Address) -> Any:
        connection = connection_to(to, tls_ca)
        connection.set_listener("drain", Listener(connection))
        connection.connect(wait=True)
        subscribe_acknowledging(connection, queue, "drain", prefetch=1000)
        return connection

    connection = subscribed(resolve())
    started = time.monotonic()
    try:
        while time.monotonic() - last[0] < idle_s and time.monotonic() - started < limit_s:
            if dropped.is_set():
                dropped.clear()
                to = resolve()
                if on_reconnect is not None:
                    on_reconnect(to)
                try:
                    connection = subscribed(to)
                except (OSError, stomp.exception.StompException):
                    dropped.set()  # not serving yet: try again
                last[0] = time.monotonic()
            send_acks(connection)
            time.sleep(0.01)
        send_acks(connection)
    finally:
        connection.disconnect()
    return delivered


class OurClient:
    """The project's failover client, with the short reconnect delays a latency-sensitive
    client sets (as bench/broker.py)."""

    label = "our client"

    def __init__(self, addresses: list[Address]) -> None:
        listed = ",".join(f"tcp://{host}:{port}" for host, port in addresses)
        url = f"failover:({listed})?initialReconnectDelay=10&maxReconnectDelay=100&randomize=false"
        self.producer = Producer(url, window=1, receipt_timeout_s=5.0)

    @property
    def generation(self) -> int:
        return self.producer.failover.generation

    def send(self, queue: str, bench_id: str) -> None:
        """Returns once this send is receipted (window 1), reconnecting as it must."""
        self.producer.send(queue, BODY.encode(), headers={ID_HEADER: bench_id}, message_id=bench_id)

    def close(self) -> None:
        self.producer.close()


def _socket_gone(connection: stomp.Connection12) -> bool:
    """stomp.py 8-9's transport checks ``self.socket is not None`` and then calls
    ``self.socket.sendall``; its receiver thread may set the socket to None in between (the
    broker went away), and the send raises AttributeError on None instead of
    NotConnectedException. Seen with ActiveMQ under a loaded host (bench/lb_failover.py)."""
    return getattr(connection.transport, "socket", None) is None


class StockStompClient:
    """stomp.py's ``Connection12`` with its defaults, given every node's address, and the
    plain loop a user writes around it: when a send is not receipted (the connection
    died), connect again (stomp.py tries each address in turn, sleeping its default
    0.1 s and more between rounds) and send the same message again."""

    label = "stock stomp.py"

    def __init__(self, addresses: list[Address]) -> None:
        self.addresses = addresses
        self.generation = 0
        self._connection: stomp.Connection12 | None = None
        self._receipts: set[str] = set()
        self._changed = threading.Condition()

    def _connect(self) -> stomp.Connection12:
        client = self

        class Listener(stomp.ConnectionListener):  # type: ignore[misc]
            def on_receipt(self, frame: Any) -> None:
                with client._changed:
                    client._receipts.add(frame.headers.get("receipt-id", ""))
                    client._changed.notify_all()

            def on_disconnected(self) -> None:
                with client._changed:
                    client._changed.notify_all()

        while True:
            connection = stomp.Connection12(self.addresses)
            connection.set_listener("bench", Listener())
            try:
                connection.connect(wait=True)
            except stomp.exception.ConnectFailedException:
                continue  # stomp.py slept between its rounds already
            except (stomp.exception.StompException, OSError):
                continue  # the node died during CONNECT: try the addresses again
            self.generation += 1
            return connection

    def send(self, queue: str, bench_id: str) -> None:
        while True:
            if self._connection is None or not self._connection.is_connected():
                self._connection = self._connect()
            connection = self._connection
            try:
                connection.send(queue, BODY, headers=receipted_headers(bench_id))
            except (stomp.exception.StompException, OSError):
                # Not connected, or the socket broke under the send (stomp.py re-raises
                # BrokenPipeError): connect again and send the same message again.
                self._connection = None
                continue
            except AttributeError:
                if not _socket_gone(connection):
                    raise  # a bug, not a lost connection
                self._connection = None  # as above: the connection is lost
                continue
            if self._receipted(connection, bench_id):
                return
            self._connection = None  # lost, or no receipt in 5 s: connect again, send again

    def _receipted(self, connection: stomp.Connection12, bench_id: str) -> bool:
        """Wait up to 5 s for the receipt of ``bench_id``; False once the connection died."""
        with self._changed:
            self._changed.wait_for(
                lambda: bench_id in self._receipts or not connection.is_connected(), 5.0
            )
            return bench_id in self._receipts

    def close(self) -> None:
        if self._connection is not None and self._connection.is_connected():
            try:
                self._connection.disconnect()
            except (OSError, stomp.exception.NotConnectedException):
                pass


class FailoverSender:
    """A client sending receipted messages on a thread; paused between kills.

    ``records`` holds (monotonic time, connection generation, bench_id) per
    RECEIPT, in order. The generation grows with every reconnect, so the first
    record after a kill with a newer generation is the first RECEIPT from the
    node that took over. ``client`` is ``OurClient`` or ``StockStompClient``.
    """

    def __init__(self, client: OurClient | StockStompClient, queue: str, tag: str) -> None:
        self.client = client
        self.queue = queue
        self.tag = tag
        self.records: list[tuple[float, int, str]] = []
        self.error: BaseException | None = None
        self._condition = threading.Condition()
        self._wanted = False
        self._sending = False
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=f"sender-{tag}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        number = 0
        try:
            while True:
                with self._condition:
                    self._condition.wait_for(lambda: self._wanted or self._closed)
                    if self._closed:
                        return
                    self._sending = True
                number += 1
                bench_id = f"{self.tag}-{number}"
                self.client.send(self.queue, bench_id)  # returns once receipted
                with self._condition:
                    self.records.append((time.monotonic(), self.client.generation, bench_id))
                    self._sending = False
                    self._condition.notify_all()
        except BaseException as error:
            with self._condition:
                self.error = error
                self._sending = False
                self._condition.notify_all()

    def _check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"failover sender {self.tag} failed: {self.error!r}")

    def resume(self) -> None:
        with self._condition:
            self._wanted = True
            self._condition.notify_all()

    def pause(self, timeout_s: float = 120.0) -> None:
        """Stop sending; returns once the send in flight (if any) is receipted."""
        with self._condition:
            self._wanted = False
            self._condition.wait_for(lambda: not self._sending, timeout_s)
        self._check()

    def wait_receipts(self, count: int, timeout_s: float = 120.0) -> None:
        """Wait until ``count`` more sends are receipted."""
        with self._condition:
            target = len(self.records) + count
            ok = self._condition.wait_for(
                lambda: len(self.records) >= target or self.error is not None, timeout_s
            )
        self._check()
        if not ok:
            raise RuntimeError(f"{self.tag}: fewer than {count} receipts in {timeout_s} s")

    @property
    def generation(self) -> int:
        return self.client.generation

    def first_receipt_after(self, killed_at: float, generation: int, timeout_s: float) -> float:
        """Seconds from ``killed_at`` to the first RECEIPT on a connection after ``generation``."""

        def found() -> float | None:
            first = None
            for at, record_generation, _ in reversed(self.records):
                if at < killed_at:
                    break
                if record_generation > generation:
                    first = at
            return None if first is None else first - killed_at

        with self._condition:
            ok = self._condition.wait_for(
                lambda: found() is not None or self.error is not None, timeout_s
            )
            took = found()
        self._check()
        if not ok or took is None:
            raise RuntimeError(f"{self.tag}: no RECEIPT within {timeout_s} s of the kill")
        return took

    def receipted_ids(self) -> list[str]:
        with self._condition:
            return [bench_id for _, _, bench_id in self.records]

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._wanted = False
            self._condition.notify_all()
        self._thread.join(30)
        self.client.close()
