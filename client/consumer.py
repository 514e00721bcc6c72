"""A consumer that resubscribes after every failover; delivery is at least once.

Acknowledgements name a delivery of one connection; after a failover those
deliveries are void and the broker redelivers the messages (``redelivered``).
``ack`` therefore reports whether it could still acknowledge; a caller that
must not process a message twice keeps the ids it handled.
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
        **failover_settings: Any,
    ) -> None:
        self.destination = destination
        self.ack_mode = ack_mode
        self.prefetch = prefetch
        self.receipt_timeout_s = receipt_timeout_s
        self.failover = Failover(url, on_connect=self._subscribe, **failover_settings)
        self.received = 0
        self._frames: deque[Frame] = deque()
        self._receipts = 0

    def receive(self, timeout_s: float) -> Message | None:
        """The next message, or None if none arrived within ``timeout_s``."""
        while True:
            frame = self._next_frame(timeout_s)
            if frame is None:
                return None
            if frame.command == "MESSAGE":
                self.received += 1
                return Message(
                    frame.get("message-id") or "",
                    frame.get("destination") or self.destination,
                    frame.header_dict(),
                    frame.body,
                    frame.get("redelivered") == "true",
                    frame.get("ack"),
                    self.failover.generation,
                )

    def ack(self, message: Message) -> bool:
        """Acknowledge and wait until the broker journaled it; False if its connection is gone."""
        if message.ack_id is None or message.generation != self.failover.generation:
            return False
        connection = self.failover.current()
        if message.generation != self.failover.generation:
            return False  # current() had to reconnect: that delivery is void
        self._receipts += 1
        receipt = f"ack-{self._receipts}"
        try:
            connection.send("ACK", {"id": message.ack_id, "receipt": receipt})
            while True:
                frame = connection.read(self.receipt_timeout_s)
                if frame is None:
                    raise ConnectionLost(f"no receipt for an ACK within {self.receipt_timeout_s} s")
                if frame.command == "RECEIPT" and frame.get("receipt-id") == receipt:
                    return True
                self._check(frame)
                self._frames.append(frame)
        except ConnectionLost as error:
            self.failover.lost(str(error))
            return False

    def close(self) -> None:
        self.failover.close()

    def _subscribe(self, connection: StompSocket) -> None:
        self._frames.clear()  # deliveries of the old connection cannot be acknowledged
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
                self.failover.lost(str(error))

    def _check(self, frame: Frame) -> None:
        if frame.command != "ERROR":
            return
        message = frame.get("message") or ""
        detail = frame.body.decode(errors="replace").strip() or message
        if message.startswith(TRANSIENT_ERROR_CODES):
            raise ConnectionLost(f"ERROR: {detail}")
        self.failover.lost(f"ERROR: {detail}")
        raise BrokerRefused(f"the broker refused the subscription: {detail}")
