"""Stable message codes of the broker connector (PRIMACY-15xx); never renumber them.

Each ERROR frame the broker sends carries one code in its ``message`` header,
and the log line for the same event starts with it, so an operator can grep
either side. The parser's codes (1501-1505) live with the parser in
``broker/frames.py`` and are listed here too.
"""

from __future__ import annotations

from primacy.broker.frames import (
    FRAME_TOO_LARGE,
    HEADERS_TOO_LARGE,
    INVALID_UTF8,
    MALFORMED_FRAME,
    TOO_MANY_HEADERS,
)

UNKNOWN_COMMAND = "PRIMACY-1506"
MESSAGE_TOO_LARGE = "PRIMACY-1507"
HEARTBEAT_TIMEOUT = "PRIMACY-1508"
NOT_CONNECTED = "PRIMACY-1509"
BAD_REQUEST = "PRIMACY-1510"  # a known command used wrongly (missing header, bad value)
UNSUPPORTED_VERSION = "PRIMACY-1511"
UNSUPPORTED_DESTINATION = "PRIMACY-1512"
# PRIMACY-1513 (message id reused for another destination) is retired: ids are per destination.
JOURNAL_FAILED = "PRIMACY-1514"  # fenced or write failed: every connection closed, no receipts
CONNECT_TIMEOUT = "PRIMACY-1515"
SERVICE_STARTED = "PRIMACY-1516"
SERVICE_STOPPED = "PRIMACY-1517"
SHUTTING_DOWN = "PRIMACY-1518"
UNREADABLE_MESSAGE = "PRIMACY-1519"

TITLES = {
    FRAME_TOO_LARGE: "frame too large",
    HEADERS_TOO_LARGE: "headers too large",
    TOO_MANY_HEADERS: "too many headers",
    INVALID_UTF8: "invalid UTF-8 in a frame's command or headers",
    MALFORMED_FRAME: "malformed frame",
    UNKNOWN_COMMAND: "unknown command",
    MESSAGE_TOO_LARGE: "message larger than max_message_size",
    HEARTBEAT_TIMEOUT: "heart-beat timeout",
    NOT_CONNECTED: "frame before CONNECT",
    BAD_REQUEST: "invalid frame",
    UNSUPPORTED_VERSION: "unsupported protocol version",
    UNSUPPORTED_DESTINATION: "unsupported destination",
    JOURNAL_FAILED: "journal failed, broker stopped",
    CONNECT_TIMEOUT: "no CONNECT in time",
    SERVICE_STARTED: "STOMP connector listening",
    SERVICE_STOPPED: "STOMP connector stopped",
    SHUTTING_DOWN: "broker shutting down",
    UNREADABLE_MESSAGE: "pending message unreadable in the journal",
}


def title(code: str) -> str:
    return f"{code} {TITLES[code]}"
