"""Stable message codes of the broker connector (PRIMACY-15xx); never renumber them.

Each ERROR frame the broker sends carries one code in its ``message`` header,
and the log line for the same event starts with it, so an operator can grep
either side. The parser's codes (1501-1505) are declared here too: this module
imports nothing, so the codec (``broker/frames.py``) can use it; the client
reaches the codes it must recognise through the codec (``TRANSIENT_ERROR_CODES``).
One declaration per code: the constant, and its meaning in ``TITLES`` (the
operator guide's table repeats it, ``tests/test_message_codes.py`` checks both).
"""

from __future__ import annotations

LAYER = "broker"
NUMBERS = range(1500, 1600)

FRAME_TOO_LARGE = "PRIMACY-1501"
HEADERS_TOO_LARGE = "PRIMACY-1502"
TOO_MANY_HEADERS = "PRIMACY-1503"
INVALID_UTF8 = "PRIMACY-1504"
MALFORMED_FRAME = "PRIMACY-1505"
UNKNOWN_COMMAND = "PRIMACY-1506"
MESSAGE_TOO_LARGE = "PRIMACY-1507"
HEARTBEAT_TIMEOUT = "PRIMACY-1508"
NOT_CONNECTED = "PRIMACY-1509"
BAD_REQUEST = "PRIMACY-1510"  # a known command used wrongly (missing header, bad value)
UNSUPPORTED_VERSION = "PRIMACY-1511"
UNSUPPORTED_DESTINATION = "PRIMACY-1512"
JOURNAL_FAILED = "PRIMACY-1514"  # fenced or write failed: every connection closed, no receipts
CONNECT_TIMEOUT = "PRIMACY-1515"
SERVICE_STARTED = "PRIMACY-1516"
SERVICE_STOPPED = "PRIMACY-1517"
SHUTTING_DOWN = "PRIMACY-1518"
UNREADABLE_MESSAGE = "PRIMACY-1519"
CONNECTION_LIMIT = "PRIMACY-1520"
SUBSCRIPTION_LIMIT = "PRIMACY-1521"
TRANSACTION_LIMIT = "PRIMACY-1522"
DEAD_LETTERED = "PRIMACY-1523"
DESTINATION_FULL = "PRIMACY-1524"
LOGIN_FAILED = "PRIMACY-1525"
NOT_AUTHORIZED = "PRIMACY-1526"
USERS_RELOADED = "PRIMACY-1527"
USERS_FILE_REFUSED = "PRIMACY-1528"
TLS_HANDSHAKE_FAILED = "PRIMACY-1529"
TLS_ROTATED = "PRIMACY-1530"
TLS_REFUSED = "PRIMACY-1531"
LOOP_FAILED = "PRIMACY-1532"  # a bug: every connection closed, the broker's thread ends
# Admission by network (admission.py); 1533-1539, next to the connection limits.
NETWORK_CONNECTION_LIMIT = "PRIMACY-1533"
UNAUTHENTICATED_LIMIT = "PRIMACY-1534"
LOGINS_BUSY = "PRIMACY-1535"
OUT_OF_DESCRIPTORS = "PRIMACY-1536"
# Messages: a transaction that does not fit, a message that cannot be dead-lettered.
TRANSACTION_FULL = "PRIMACY-1540"
MESSAGE_HELD_BACK = "PRIMACY-1541"
# What a client makes the master hold, sized (state_limits.py): 1542-1545.
HEADER_VALUE_TOO_LONG = "PRIMACY-1542"
DESTINATION_NAME_TOO_LONG = "PRIMACY-1543"
CONNECTION_STATE_LIMIT = "PRIMACY-1544"
NETWORK_STATE_LIMIT = "PRIMACY-1545"
# Temporary queues for request/reply (temp_queues.py): 1546-1547.
TEMP_QUEUE_LIMIT = "PRIMACY-1546"
TEMP_QUEUE_NOT_OWNER = "PRIMACY-1547"
# STOMP over WebSocket (websocket.py)
WEBSOCKET_STARTED = "PRIMACY-1570"
WEBSOCKET_HANDSHAKE_REFUSED = "PRIMACY-1571"
WEBSOCKET_PROTOCOL_ERROR = "PRIMACY-1572"
# Topics and durable topic subscriptions (topics.py): 1560-1569.
DURABLE_NEEDS_CLIENT_ID = "PRIMACY-1560"
DURABLE_IN_USE = "PRIMACY-1561"
TOPIC_MESSAGES_DROPPED = "PRIMACY-1562"

# The message path (issue 49): 1580-1584.
LOOP_IN_JOURNAL_COMMIT = "PRIMACY-1580"

# A retired code keeps its number out of use for ever.
RETIRED = {"PRIMACY-1513": "message ids are per destination, never reused"}

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
    CONNECTION_LIMIT: "too many connections (max_connections)",
    SUBSCRIPTION_LIMIT: (
        "too many subscriptions on one connection (max_subscriptions_per_connection)"
    ),
    TRANSACTION_LIMIT: (
        "transaction limit reached (max_transactions_per_connection or max_transaction_bytes)"
    ),
    DEAD_LETTERED: "message moved to its dead-letter queue after max_redeliveries",
    DESTINATION_FULL: (
        "no room for the message (max_destination_messages or max_pending_messages)"
    ),
    LOGIN_FAILED: "login failed (no login, unknown user or wrong passcode)",
    NOT_AUTHORIZED: "the user may not send to or receive from the destination",
    USERS_RELOADED: "the users file was edited and read again",
    USERS_FILE_REFUSED: "the users file is refused (writable by others, or not of its shape)",
    TLS_HANDSHAKE_FAILED: "a TLS handshake failed (a plaintext client, a refused certificate)",
    TLS_ROTATED: "a TLS certificate changed on disk and serves new connections",
    TLS_REFUSED: "a TLS certificate, key or CA file is refused; the one in use stays",
    LOOP_FAILED: "an exception escaped a handler on the broker's event loop; the node stops",
    NETWORK_CONNECTION_LIMIT: "too many connections from one network (max_connections_per_network)",
    UNAUTHENTICATED_LIMIT: (
        "too many connections without CONNECT from one network (max_unauthenticated_per_network)"
    ),
    LOGINS_BUSY: "too many logins in progress from one network, or in all; try again shortly",
    OUT_OF_DESCRIPTORS: (
        "the process has no descriptor left to accept a connection; accepting pauses for a second"
    ),
    TRANSACTION_FULL: (
        "COMMIT refused: the transaction's messages do not fit "
        "(max_destination_messages or max_pending_messages)"
    ),
    MESSAGE_HELD_BACK: (
        "message kept in the journal but no longer delivered by this master "
        "(it cannot move to a dead-letter queue)"
    ),
    HEADER_VALUE_TOO_LONG: "a header value (a receipt id included) over max_header_value_bytes",
    DESTINATION_NAME_TOO_LONG: "a destination name over max_destination_name_bytes",
    CONNECTION_STATE_LIMIT: (
        "the connection's subscriptions and open transactions would pass "
        "max_state_bytes_per_connection"
    ),
    NETWORK_STATE_LIMIT: (
        "the subscriptions and open transactions of one network's connections, or of all, "
        "would pass max_state_bytes_per_network or max_state_bytes"
    ),
    TEMP_QUEUE_LIMIT: (
        "too many temporary queues on one connection (max_temp_queues_per_connection)"
    ),
    TEMP_QUEUE_NOT_OWNER: "a SUBSCRIBE to another connection's temporary queue, or to one gone",
    WEBSOCKET_STARTED: "STOMP over WebSocket listener started (stomp_websocket)",
    WEBSOCKET_HANDSHAKE_REFUSED: (
        "a WebSocket opening handshake refused: not a WebSocket upgrade, or no STOMP subprotocol"
    ),
    WEBSOCKET_PROTOCOL_ERROR: (
        "a WebSocket client broke the protocol (bad frame, message over the frame limit): closed"
    ),
    DURABLE_NEEDS_CLIENT_ID: "a durable topic subscription needs the client-id header on CONNECT",
    DURABLE_IN_USE: "the durable topic subscription has a subscriber already",
    TOPIC_MESSAGES_DROPPED: (
        "a non-durable topic subscriber fell too far behind and loses its oldest messages"
    ),
    LOOP_IN_JOURNAL_COMMIT: (
        "the broker stopped while its loop was in a journal commit (the share does not answer)"
    ),
}


def title(code: str) -> str:
    return f"{code} {TITLES[code]}"
