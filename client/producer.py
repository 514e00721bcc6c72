"""A producer that keeps every send until its RECEIPT, and resends them all after a failover.

Each message gets a ``message-id`` (the caller's, or one made here) before
its first send and keeps it through every resend, so the broker stores it
once however often it arrives. ``send`` returns once fewer than ``window``
sends are unreceipted (1: every send waits for its own receipt).
"""

from __future__ import annotations

import itertools
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from primacy.broker.frames import TRANSIENT_ERROR_CODES, Frame
from primacy.client.errors import BrokerRefused, ConnectionLost
from primacy.client.failover import Failover
from primacy.client.url import FailoverUrl
from primacy.client.wire import StompSocket, client_frame


@dataclass(frozen=True)
class PendingSend:
    receipt: str
    message_id: str
    frame: bytes  # the SEND frame, encoded once, written again after every failover


class Producer:
    def __init__(
        self,
        url: str | FailoverUrl,
        *,
        window: int = 1,
        receipt_timeout_s: float = 10.0,
        **failover_settings: Any,
    ) -> None:
        if window < 1:
            raise ValueError("window must be at least 1")
        self.window = window
        self.receipt_timeout_s = receipt_timeout_s
        self.client_id = uuid.uuid4().hex[:16]
        self.failover = Failover(url, on_connect=self._resend_all, **failover_settings)
        self.unreceipted: OrderedDict[str, PendingSend] = OrderedDict()
        self.sent = 0
        self.receipted = 0
        self.resent = 0
        self._numbers = itertools.count(1)

    def send(
        self,
        destination: str,
        body: bytes,
        headers: dict[str, str] | None = None,
        message_id: str | None = None,
    ) -> str:
        """Send one message; returns its message id. Blocks while the window is full."""
        number = next(self._numbers)
        receipt = f"{self.client_id}-r{number}"
        message_id = message_id or f"{self.client_id}-{number}"
        frame = client_frame(
            "SEND",
            {
                **(headers or {}),
                "destination": destination,
                "message-id": message_id,
                "receipt": receipt,
                "persistent": "true",
            },
            body,
        )  # before the send is counted: a ValueError (a control character) leaves no trace
        pending = PendingSend(receipt, message_id, frame)
        self.unreceipted[pending.receipt] = pending
        self.sent += 1
        generation = self.failover.generation
        connection = self.failover.current()
        if self.failover.generation == generation:  # else the reconnect resent it already
            try:
                self._write(connection, pending)
            except ConnectionLost as error:
                self.failover.lost(str(error))
        while len(self.unreceipted) >= self.window:
            self._await_receipt()
        return pending.message_id

    def flush(self) -> None:
        """Wait until every send so far is receipted (resending through failovers)."""
        while self.unreceipted:
            self._await_receipt()

    def close(self) -> None:
        self.failover.close()

    def _write(self, connection: StompSocket, pending: PendingSend) -> None:
        connection.send_bytes(pending.frame)

    def _resend_all(self, connection: StompSocket) -> None:
        # On the first connection this writes the send that opened it: not a resend.
        first_connection = self.failover.generation == 1
        for pending in list(self.unreceipted.values()):
            self._write(connection, pending)
            if not first_connection:
                self.resent += 1

    def _await_receipt(self) -> None:
        connection = self.failover.current()
        try:
            frame = connection.read(self.receipt_timeout_s)
        except ConnectionLost as error:
            self.failover.lost(str(error))
            return
        if frame is None:
            self.failover.lost(f"no receipt within {self.receipt_timeout_s} s")
        elif frame.command == "RECEIPT":
            if self.unreceipted.pop(frame.get("receipt-id") or "", None) is not None:
                self.receipted += 1
        elif frame.command == "ERROR":
            self._on_error(frame)

    def _on_error(self, frame: Frame) -> None:
        message = frame.get("message") or ""
        detail = frame.body.decode(errors="replace").strip() or message
        self.failover.lost(f"ERROR: {detail}")  # an ERROR always ends the connection
        if message.startswith(TRANSIENT_ERROR_CODES):
            return
        refused = self.unreceipted.pop(frame.get("receipt-id") or "", None)
        what = f"message {refused.message_id!r}" if refused else "a send"
        raise BrokerRefused(f"the broker refused {what}: {detail}")
