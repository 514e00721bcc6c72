"""The client's exceptions and their stable message codes (PRIMACY-16xx)."""

from __future__ import annotations

URL_INVALID = "PRIMACY-1601"
NO_BROKER = "PRIMACY-1602"  # every reconnect attempt failed
TIMED_OUT = "PRIMACY-1603"  # no connection within the URL's timeout
REFUSED = "PRIMACY-1604"  # the broker answered ERROR to something resending will not fix
PROTOCOL = "PRIMACY-1605"  # the broker sent bytes that are not STOMP
RECONNECTING = "PRIMACY-1606"  # logged: lost the broker, failing over
CONNECTED = "PRIMACY-1607"  # logged: connected (again)


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
