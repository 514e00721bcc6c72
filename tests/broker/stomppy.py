"""A thin wrapper around the third-party stomp.py client, for tests and the benchmark."""

from __future__ import annotations

import itertools
import queue
import threading
from typing import Any

import stomp
import stomp.exception


class Collector(stomp.ConnectionListener):  # type: ignore[misc]
    """Collects what stomp.py's receiver thread hands over."""

    def __init__(self) -> None:
        self.messages: queue.Queue[Any] = queue.Queue()
        self.errors: list[Any] = []
        self.receipts: set[str] = set()
        self.disconnected = threading.Event()
        self._condition = threading.Condition()

    def on_message(self, frame: Any) -> None:
        self.messages.put(frame)

    def on_receipt(self, frame: Any) -> None:
        with self._condition:
            self.receipts.add(frame.headers["receipt-id"])
            self._condition.notify_all()

    def on_error(self, frame: Any) -> None:
        with self._condition:
            self.errors.append(frame)
            self._condition.notify_all()

    def on_disconnected(self) -> None:
        with self._condition:
            self.disconnected.set()
            self._condition.notify_all()

    def wait_receipt(self, receipt: str, timeout_s: float = 10.0) -> bool:
        """True once the receipt came; False if the connection ended or erred without it."""
        with self._condition:
            self._condition.wait_for(
                lambda: receipt in self.receipts or self.errors or self.disconnected.is_set(),
                timeout_s,
            )
            return receipt in self.receipts


class StompPy:
    """One stomp.py 1.2 connection with a collector."""

    _receipts = itertools.count(1)

    def __init__(
        self,
        address: tuple[str, int],
        heartbeats: tuple[int, int] = (0, 0),
        login: str | None = None,
        passcode: str | None = None,
        tls: dict[str, Any] | None = None,
    ) -> None:
        self.connection = stomp.Connection12(
            [address], heartbeats=heartbeats, reconnect_attempts_max=1
        )
        if tls is not None:  # stomp.py's own TLS: ca_certs, cert_file, key_file
            self.connection.set_ssl(for_hosts=[address], **tls)
        self.listener = Collector()
        self.connection.set_listener("collector", self.listener)
        self.connection.connect(login, passcode, wait=True)

    def send(self, destination: str, body: str | bytes, **headers: str) -> bool:
        """Send with a receipt and wait for it; True if it came."""
        receipt = f"r{next(self._receipts)}"
        self.connection.send(destination, body, headers={**headers, "receipt": receipt})
        return self.listener.wait_receipt(receipt)

    def frame_with_receipt(self, method: str, *args: Any, **kwargs: Any) -> bool:
        receipt = f"r{next(self._receipts)}"
        getattr(self.connection, method)(*args, receipt=receipt, **kwargs)
        return self.listener.wait_receipt(receipt)

    def subscribe(
        self, destination: str, subscription: str, ack: str = "auto", **headers: str
    ) -> None:
        receipt = f"r{next(self._receipts)}"
        self.connection.subscribe(
            destination, subscription, ack=ack, headers={**headers, "receipt": receipt}
        )
        assert self.listener.wait_receipt(receipt)

    def message(self, timeout_s: float = 10.0) -> Any:
        return self.listener.messages.get(timeout=timeout_s)

    def no_message(self, wait_s: float = 0.3) -> bool:
        try:
            self.listener.messages.get(timeout=wait_s)
        except queue.Empty:
            return True
        return False

    def close(self) -> None:
        """Disconnect; a broker that closed the connection after an ERROR may beat us to it."""
        if self.connection.is_connected():
            try:
                self.connection.disconnect()
            except (OSError, stomp.exception.NotConnectedException):
                # stomp.py's receiver closes the socket when it reads the broker's EOF; if that
                # lands between is_connected() and the DISCONNECT (an OSError while sending,
                # or no socket left at all), there is nothing to close.
                pass
