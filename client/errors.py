"""The client's exceptions and their stable message codes (PRIMACY-16xx).

One declaration per code: the constant, and its meaning in ``TITLES`` (the
operator guide's table repeats it, ``tests/test_message_codes.py`` checks both).
The broker's codes the client recognises in ERROR frames come with the STOMP codec
(``broker/frames.py``, ``TRANSIENT_ERROR_CODES``), the one part of the broker it uses.
"""

from __future__ import annotations

LAYER = "client"
NUMBERS = range(1600, 1700)

URL_INVALID = "PRIMACY-1601"
NO_BROKER = "PRIMACY-1602"
TIMED_OUT = "PRIMACY-1603"
REFUSED = "PRIMACY-1604"
PROTOCOL = "PRIMACY-1605"
RECONNECTING = "PRIMACY-1606"  # logged
CONNECTED = "PRIMACY-1607"  # logged

TITLES = {
    URL_INVALID: "the failover URL is not valid",
    NO_BROKER: "no broker of the URL could be reached (every reconnect attempt failed)",
    TIMED_OUT: "no connection within the URL's timeout",
    REFUSED: "the broker refused a request that resending will not fix (ERROR)",
    PROTOCOL: "the broker sent bytes that are not STOMP",
    RECONNECTING: "lost the broker, failing over",
    CONNECTED: "connected (again)",
}


class ClientError(Exception):
    """Base of the client's errors; ``code`` is a stable message code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code} {message}")
        self.code = code


class NoBrokerAvailable(ClientError):
    def __init__(self, message: str) -> None:
        super().__init__(NO_BROKER, message)


class ClientTimeout(ClientError):
    def __init__(self, message: str) -> None:
        super().__init__(TIMED_OUT, message)


class BrokerRefused(ClientError):
    """An ERROR frame about the request itself (too large, bad destination): do not resend."""

    def __init__(self, message: str) -> None:
        super().__init__(REFUSED, message)


class ConnectionLost(Exception):
    """The current connection is unusable; the failover layer reconnects. Internal."""
