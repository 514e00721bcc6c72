"""A requester and a replier through failovers: the request/reply pair of the chaos traffic.

The requester subscribes to its temporary queue (``/temp-queue/replies``) on every connection
and sends requests to ``/queue/requests`` with ``reply-to`` and a ``correlation-id``, one at a
time, each until its RECEIPT (resent with the same ``message-id`` after a failover, so the
broker stores it once). The replier consumes ``/queue/requests`` with a failover consumer and
answers each request to its ``reply-to``.

What the broker promises (docs/stomp.md, "Request/reply"): a receipted request is a queue
message (owed to the replier at least once, stored once); a temporary queue is gone with its
connection, so a reply sent to the queue of a connection that failed over is discarded. The
requester therefore *re-issues* a request whose answer did not come, as a new request (a new
``message-id``, the same ``correlation-id``), after every reconnect and after a quiet while,
as docs/stomp.md tells requesters to. What the checker verifies of it
(tests/harness/checker.py): every receipted request id delivered to the replier (its
"lost"), no request stored twice (its "duplicates"), every reply the requester got answers a
request it made with that request's body (``strays``), and every request answered once the
faults are over (``unanswered``).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

from primacy.client.consumer import Consumer
from primacy.client.errors import ConnectionLost
from primacy.client.failover import Failover
from primacy.client.producer import Producer
from primacy.client.wire import StompSocket, client_frame

REQUESTS = "/queue/requests"
REPLIES = "/temp-queue/replies"
_REISSUE_AFTER_S = 10.0  # an unanswered request on a live connection is asked again after this
_ANSWER_CATCH_UP_S = 60.0  # after the traffic stops: how long every request has to be answered


def request_body(correlation: str) -> bytes:
    return f"request {correlation}".encode()


def reply_body(request: bytes) -> bytes:
    return b"reply to " + request


class Requester:
    """One requester thread's state; ``run`` until ``stop`` and every request answered."""

    def __init__(
        self,
        url: str,
        *,
        stop: threading.Event,
        on_sent: Callable[[str], None],
        on_receipted: Callable[[str], None],
        interval_s: float,
        receipt_timeout_s: float,
    ) -> None:
        self.url = url
        self.stop = stop
        self.on_sent, self.on_receipted = on_sent, on_receipted
        self.interval_s = interval_s
        self.receipt_timeout_s = receipt_timeout_s
        self.answers: collections.Counter[str] = collections.Counter()  # correlation -> replies
        self.asked: set[str] = set()  # every correlation id sent
        self.reissued = 0
        self.strays: list[str] = []  # replies that answer nothing asked, or with a wrong body
        self._pending: dict[str, tuple[str, bytes]] = {}  # receipt -> (message id, frame)
        self._asked_at: dict[str, tuple[int, float]] = {}  # unanswered -> (generation, when)
        self._attempts: collections.Counter[str] = collections.Counter()
        self._receipts = 0
        self._failover = Failover(url, on_connect=self._on_connect)

    @property
    def unanswered(self) -> set[str]:
        return self.asked - set(self.answers)

    def run(self) -> None:
        number = 0
        catch_up_until: float | None = None
        try:
            while True:
                if self.stop.is_set():
                    catch_up_until = catch_up_until or time.monotonic() + _ANSWER_CATCH_UP_S
                    if not self.unanswered or time.monotonic() > catch_up_until:
                        return
                elif not self._pending:
                    number += 1
                    self._ask(f"req-{number}")
                    time.sleep(self.interval_s)
                self._read_one()
                self._reissue_quiet()
        finally:
            self._failover.close()

    def _ask(self, correlation: str) -> None:
        """Send (or re-issue) the request ``correlation`` as a new message."""
        self._attempts[correlation] += 1
        message_id = f"{correlation}.{self._attempts[correlation]}"
        self._receipts += 1
        receipt = f"rq-{self._receipts}"
        frame = client_frame(
            "SEND",
            {
                "destination": REQUESTS,
                "reply-to": REPLIES,
                "correlation-id": correlation,
                "message-id": message_id,
                "receipt": receipt,
                "persistent": "true",
            },
            request_body(correlation),
        )
        self.asked.add(correlation)
        self.on_sent(message_id)
        self._pending[receipt] = (message_id, frame)
        generation = self._failover.generation
        connection = self._failover.current()
        self._asked_at[correlation] = (self._failover.generation, time.monotonic())
        if self._failover.generation == generation:  # else on_connect wrote it already
            self._write(connection, frame)

    def _on_connect(self, connection: StompSocket) -> None:
        connection.send("SUBSCRIBE", {"id": "replies", "destination": REPLIES, "ack": "auto"})
        for _message_id, frame in self._pending.values():  # resends: stored once at most
            connection.send_bytes(frame)
        # The replies to requests asked on an earlier connection went to a temporary queue that
        # is gone: ask them again (once this connection is current, from _reissue_quiet).
        self._asked_at = {c: (0, at) for c, (_g, at) in self._asked_at.items()}

    def _reissue_quiet(self) -> None:
        if self._pending or self._failover.connection is None:
            return
        now = time.monotonic()
        for correlation, (generation, at) in list(self._asked_at.items()):
            stale = generation != self._failover.generation
            if correlation not in self.answers and (stale or now - at > _REISSUE_AFTER_S):
                self.reissued += 1
                self._ask(correlation)
                return  # one request in flight at a time

    def _write(self, connection: StompSocket, frame: bytes) -> None:
        try:
            connection.send_bytes(frame)
        except ConnectionLost as error:
            self._failover.lost(str(error))

    def _read_one(self) -> None:
        connection = self._failover.current()
        try:
            frame = connection.read(0.2 if not self._pending else self.receipt_timeout_s)
        except ConnectionLost as error:
            self._failover.lost(str(error))
            return
        if frame is None:
            if self._pending:
                self._failover.lost(f"no receipt within {self.receipt_timeout_s} s")
        elif frame.command == "RECEIPT":
            pending = self._pending.pop(frame.get("receipt-id") or "", None)
            if pending is not None:
                self.on_receipted(pending[0])
        elif frame.command == "MESSAGE":
            self._answered(frame.get("correlation-id") or "", frame.body)
        elif frame.command == "ERROR":
            self._failover.lost(f"ERROR: {frame.get('message')}")

    def _answered(self, correlation: str, body: bytes) -> None:
        if correlation not in self.asked or body != reply_body(request_body(correlation)):
            self.strays.append(f"reply {body[:60]!r} for correlation-id {correlation!r}")
            return
        self.answers[correlation] += 1
        self._asked_at.pop(correlation, None)


def replier(
    url: str,
    stop: threading.Event,
    on_delivered: Callable[[str], None],
    receipt_timeout_s: float,
) -> None:
    """Answer every request on ``/queue/requests`` to its ``reply-to`` until ``stop``."""
    consumer = Consumer(url, REQUESTS, receipt_timeout_s=receipt_timeout_s)
    answers = Producer(url, window=1, receipt_timeout_s=receipt_timeout_s)
    try:
        while not stop.is_set():
            message = consumer.receive(0.2)
            if message is None:
                continue
            on_delivered(message.message_id)
            answers.send(
                message.headers["reply-to"],
                reply_body(message.body),
                headers={"correlation-id": message.headers.get("correlation-id", "")},
            )
            consumer.ack(message)
    finally:
        answers.close()
        consumer.close()
