"""A consumer that resubscribes after every failover; delivery is at least once.

Acknowledgements name a delivery of one connection; after a failover those
deliveries are void and the broker redelivers the messages (``redelivered``).
``ack`` therefore reports whether it could still acknowledge; a caller that
must not process a message twice keeps the ids it handled.

Every ACK asks for a RECEIPT (the broker sends it once the ACK is journaled).
``ack(message)`` waits for it; ``ack(message, wait=False)`` keeps up to
``ack_window`` ACKs in flight and takes their receipts as they come, which is
what lets a consumer acknowledge as fast as it receives. An ACK whose
connection failed before its receipt is *in doubt*: the broker may have
journaled it or not. If it did not, the broker delivers the message again and
the doubt ends there; one that never comes back was acknowledged.
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
        ack_window: int = 64,
        **failover_settings: Any,
    ) -> None:
        self.destination = destination
        self.ack_mode = ack_mode
        self.prefetch = prefetch
        self.receipt_timeout_s = receipt_timeout_s
        self.ack_window = ack_window
        self.failover = Failover(url, on_connect=self._subscribe, **failover_settings)
        self.received = 0
        self._frames: deque[Frame] = deque()
        self._receipts = 0
        self._unconfirmed: dict[str, Message] = {}  # receipt id -> its ACK's message
        self._confirmed: list[Message] = []  # receipted since the last take_confirmed()
        self._in_doubt: dict[str, Message] = {}  # message id -> ACK sent, receipt lost

    @property
    def unconfirmed(self) -> int:
        """ACKs sent on the current connection whose receipts have not come yet."""
        return len(self._unconfirmed)

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
        self._receipts += 1
        receipt = f"ack-{self._receipts}"
        try:
            connection.send("ACK", {"id": message.ack_id, "receipt": receipt})
            self._unconfirmed[receipt] = message
            while receipt in self._unconfirmed if wait else self.unconfirmed > self.ack_window:
                self._take_receipt(connection)
        except ConnectionLost as error:
            self._lost(str(error))
            return not wait
        return True

    def flush(self) -> None:
        """Wait for the receipts of every ACK sent; those whose connection fails first stay
        in doubt (``in_doubt``)."""
        connection = self.failover.connection
        try:
            while self._unconfirmed and connection is not None:
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
        if frame.command == "RECEIPT" and frame.get("receipt-id") in self._unconfirmed:
            self._confirm(frame)
            return
        self._check(frame)
        self._frames.append(frame)

    def _confirm(self, frame: Frame) -> None:
        message = self._unconfirmed.pop(frame.get("receipt-id") or "", None)
        if message is not None:
            self._confirmed.append(message)

    def _doubt_unconfirmed(self) -> None:
        for message in self._unconfirmed.values():
            self._in_doubt[message.message_id] = message
        self._unconfirmed.clear()

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
