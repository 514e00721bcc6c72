"""A stomp.py listener that counts a producer's RECEIPTs: the throughput rounds' and the soak's."""

from __future__ import annotations

import threading
from typing import Any

import stomp


class ReceiptListener(stomp.ConnectionListener):  # type: ignore[misc]
    """Releases ``receipts`` once per RECEIPT or ERROR (a producer awaiting its RECEIPT must
    wake for an ERROR too); an ERROR's message and body go to ``errors``."""

    def __init__(self) -> None:
        self.receipts = threading.Semaphore(0)
        self.errors: list[str] = []

    def on_receipt(self, frame: Any) -> None:
        self.receipts.release()

    def on_error(self, frame: Any) -> None:
        self.errors.append(frame.headers.get("message", "") + " " + str(frame.body))
        self.receipts.release()
