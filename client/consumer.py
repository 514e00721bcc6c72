"""A consumer that resubscribes after every failover; delivery is at least once.

Acknowledgements name a delivery of one connection; after a failover those
deliveries are void and the broker redelivers the messages (``redelivered``).
``ack`` therefore reports whether it could still acknowledge; a caller that
must not process a message twice keeps the ids it handled.

A RECEIPT from a primacy broker means that its frame and every frame the
connection sent before it are journaled (broker/replies.py, docs/stomp.md).
``ack(message)`` asks for one and waits for it; ``ack(message, wait=False)``
keeps up to ``ack_window`` ACKs in flight, asks a receipt of one ACK in
``receipt_every`` (and of the one that fills the window), and takes the
receipts as they come: what lets a consumer acknowledge as fast as it receives.
``flush`` ends with a receipted BEGIN/ABORT pair when the last ACK asked for
none. An ACK whose connection failed before its receipt is *in doubt*: the
broker may have journaled it or not. If it did not, the broker delivers the
message again and the doubt ends there; one that never comes back was
acknowledged.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from primacy.broker.frames import TRANSIENT_ERROR_CODES, Frame
from primacy.client.errors import BrokerRefused, ConnectionLost
from primacy.client.failover import Failover
from primacy.client.url import FailoverUrl
from primacy.client.wire import StompSocket

SUBSCRIPTION_ID = "primacy-consumer"


@dataclass(frozen=True)
class Message:
    message_id: str
    destination: str
    headers: dict[str, str]
    body: bytes
    redelivered: bool
    ack_id: str | None
    generation: int  # which connection delivered it


class Consumer:
    def __init__(
        self,
        url: str | FailoverUrl,
        destination: str,
        *,
        ack_mode: str = "client-individual",
        prefetch: int = 100,
        receipt_timeout_s: float = 10.0,
        ack_window: int = 1024,
        receipt_every: int = 32,
        subscribe_headers: dict[str, str] | None = None,
        **failover_settings: Any,
    ) -> None:
        self.destination = destination
        # More SUBSCRIBE headers: ``activemq.subscriptionName`` for a durable topic subscription
        # (with ``client_id``, a failover setting: the CONNECT's client-id).
        self.subscribe_headers = dict(subscribe_headers or {})
        self.ack_mode = ack_mode
        self.prefetch = prefetch
        self.receipt_timeout_s = receipt_timeout_s
        self.ack_window = ack_window
        self.receipt_every = max(1, min(receipt_every, ack_window))
        self.failover = Failover(url, on_connect=self._subscribe, **failover_settings)
        self.received = 0
        self._frames: deque[Frame] = deque()
        self._receipts = 0
        # ACKs sent on this connection and not yet receipted, in order, with the receipt each
        # asked for (None: confirmed by the next receipt); a None message is a flush's BEGIN.
        self._unconfirmed: deque[tuple[str | None, Message | None]] = deque()
        self._asked: set[str] = set()  # the receipts asked for among them
        self._acks_unconfirmed = 0  # the ACKs among them
        self._since_asked = 0  # ACKs sent since the last that asked for a receipt
        self._confirmed: list[Message] = []  # receipted since the last take_confirmed()
        self._in_doubt: dict[str, Message] = {}  # message id -> ACK sent, receipt lost

    @property
    def unconfirmed(self) -> int:
        """ACKs sent on the current connection whose receipts have not come yet."""
        return self._acks_unconfirmed

    @property
    def in_doubt(self) -> list[Message]:
        """Messages whose ACK was sent but whose connection failed before its receipt, and
        that the broker has not delivered again since."""
        return list(self._in_doubt.values())

    def take_confirmed(self) -> list[Message]:
        """The messages whose ACK was receipted since the last call."""
        confirmed, self._confirmed = self._confirmed, []
        return confirmed

    def receive(self, timeout_s: float) -> Message | None:
        """The next message, or None if none arrived within ``timeout_s``."""
        while True:
            frame = self._next_frame(timeout_s)
            if frame is None:
                return None
            if frame.command == "RECEIPT":
                self._confirm(frame)
            elif frame.command == "MESSAGE":
                self.received += 1
                # Delivered again: the ACK in doubt did not take, the message is back.
                self._in_doubt.pop(frame.get("message-id") or "", None)
                return Message(
                    frame.get("message-id") or "",
                    frame.get("destination") or self.destination,
                    frame.header_dict(),
                    frame.body,
                    frame.get("redelivered") == "true",
                    frame.get("ack"),
                    self.failover.generation,
                )

    def ack(self, message: Message, *, wait: bool = True) -> bool:
        """Acknowledge ``message``; False if its delivery is void (its connection is gone).

        ``wait``: return once the broker journaled the ACK (its RECEIPT came); False if the
        connection failed first (the ACK is then in doubt). Without ``wait``: return once
        sent, after waiting only while more than ``ack_window`` ACKs are unconfirmed; the
        receipts are taken while receiving (``take_confirmed``, ``flush``).
        """
        if message.ack_id is None or message.generation != self.failover.generation:
            return False
        connection = self.failover.current()
        if message.generation != self.failover.generation:
            return False  # current() had to reconnect: that delivery is void
        receipt = None
        if (
            wait
            or self._since_asked + 1 >= self.receipt_every
            or self.unconfirmed + 1 >= self.ack_window
        ):
            self._receipts += 1
            receipt = f"ack-{self._receipts}"
        headers = (
            {"id": message.ack_id}
            if receipt is None
            else {"id": message.ack_id, "receipt": receipt}
        )
        try:
            if receipt is not None:  # with the ACKs queued before it: one write for all
                connection.send("ACK", headers)
            else:  # sent with the next receipted one, or before the next wait for the broker
                connection.send_later("ACK", headers)
            self._sent(receipt, message)
            while receipt in self._asked if wait else self.unconfirmed > self.ack_window:
                self._take_receipt(connection)
        except ConnectionLost as error:
            self._lost(str(error))
            return not wait
        return True

    def flush(self) -> None:
        """Wait until every ACK sent is receipted; those whose connection fails first stay in
        doubt (``in_doubt``)."""
        connection = self.failover.connection
        if connection is None or not self._unconfirmed:
            return
        try:
            if self._unconfirmed[-1][0] is None:  # the last ACK asked for no receipt
                self._receipts += 1
                receipt, transaction = f"ack-{self._receipts}", f"primacy-flush-{self._receipts}"
                connection.send("BEGIN", {"transaction": transaction, "receipt": receipt})
                connection.send("ABORT", {"transaction": transaction})
                self._sent(receipt, None)
            while self._unconfirmed:
                self._take_receipt(connection)
        except ConnectionLost as error:
            self._lost(str(error))

    def close(self) -> None:
        self.failover.close()

    def _take_receipt(self, connection: StompSocket) -> None:
        """Read one frame, waiting at most ``receipt_timeout_s``: a receipt is taken, anything
        else kept for ``receive``."""
        frame = connection.read(self.receipt_timeout_s)
        if frame is None:
            raise ConnectionLost(f"no receipt for an ACK within {self.receipt_timeout_s} s")
        if frame.command == "RECEIPT" and frame.get("receipt-id") in self._asked:
            self._confirm(frame)
            return
        self._check(frame)
        self._frames.append(frame)

    def _sent(self, receipt: str | None, message: Message | None) -> None:
        self._unconfirmed.append((receipt, message))
        self._acks_unconfirmed += message is not None
        self._since_asked = 0 if receipt is not None else self._since_asked + 1
        if receipt is not None:
            self._asked.add(receipt)

    def _confirm(self, frame: Frame) -> None:
        """A receipt confirms its frame and every frame sent before it."""
        receipt = frame.get("receipt-id") or ""
        if receipt not in self._asked:
            return
        self._asked.discard(receipt)
        while self._unconfirmed:
            asked, message = self._unconfirmed.popleft()
            if message is not None:
                self._acks_unconfirmed -= 1
                self._confirmed.append(message)
            if asked is not None:
                self._asked.discard(asked)
            if asked == receipt:
                return

    def _doubt_unconfirmed(self) -> None:
        for _, message in self._unconfirmed:
            if message is not None:
                self._in_doubt[message.message_id] = message
        self._unconfirmed.clear()
        self._asked.clear()
        self._acks_unconfirmed = self._since_asked = 0

    def _lost(self, reason: str) -> None:
        self._doubt_unconfirmed()
        self.failover.lost(reason)

    def _subscribe(self, connection: StompSocket) -> None:
        self._frames.clear()  # deliveries of the old connection cannot be acknowledged
        self._doubt_unconfirmed()  # nor can receipts of its ACKs come any more
        connection.send(
            "SUBSCRIBE",
            {
                "id": SUBSCRIPTION_ID,
                "destination": self.destination,
                "ack": self.ack_mode,
                "activemq.prefetchSize": str(self.prefetch),
                **self.subscribe_headers,
            },
        )

    def _next_frame(self, timeout_s: float) -> Frame | None:
        if self._frames:
            return self._frames.popleft()
        while True:
            connection = self.failover.current()
            try:
                frame = connection.read(timeout_s)
                if frame is not None:
                    self._check(frame)
                return frame
            except ConnectionLost as error:
                self._lost(str(error))

    def _check(self, frame: Frame) -> None:
        if frame.command != "ERROR":
            return
        message = frame.get("message") or ""
        detail = frame.body.decode(errors="replace").strip() or message
        if message.startswith(TRANSIENT_ERROR_CODES):
            raise ConnectionLost(f"ERROR: {detail}")
        self._lost(f"ERROR: {detail}")
        raise BrokerRefused(f"the broker refused the subscription: {detail}")
