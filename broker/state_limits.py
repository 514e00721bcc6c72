"""What a client may make the master keep: header values and destination names by length, and
its subscriptions and open transactions by their size in bytes.

Counting was not enough (issue 42, finding 4): a connection's 1000 subscriptions cost little
with short names and 60 MB with names of 60 KB, and the default 1000 connections made that
60 GB. So a header value (a receipt id, which the RECEIPT echoes, included) may be at most
``max_header_value_bytes`` long and a destination name at most ``max_destination_name_bytes``,
and what a connection keeps between its frames is charged, in bytes, to its ``StateAccount``:
its own budget (``max_state_bytes_per_connection``) and the node's ``ByteBudget``
(``admission.py``), per network (``max_state_bytes_per_network``) and in all
(``max_state_bytes``). A charge is what the master holds for it: the names, the frames a
transaction keeps, and the bookkeeping measured for one subscription or transaction. It is
given back when the subscription or transaction ends, and all of it when the connection goes.
"""

from __future__ import annotations

from primacy.broker import codes
from primacy.broker.admission import LOCAL, ByteBudget
from primacy.broker.frame_rules import TOPIC_PREFIX
from primacy.broker.frames import Frame
from primacy.broker.refusals import Refused
from primacy.broker.topics import LIVE_SUBSCRIPTION_MESSAGES

# The master's own bookkeeping for one subscription (its object, the books of its connection
# and its destination, a destination queue of its own) and for one open transaction: Python's
# objects measure about 0.6 KiB and 0.3 KiB with tracemalloc on CPython 3.11 (3000 of each, short
# names); the RSS grew by about 1.4 KiB a subscription beyond its name in issue 42's attack.
SUBSCRIPTION_BYTES = 1536
TRANSACTION_BYTES = 640
# A topic subscription's queue full: each copy of a message (a QueuedMessage tuple sharing
# the body, 120 bytes with tracemalloc on CPython 3.11, and its heap slot) per message held.
# 10 000 subscriptions of one network then hold 88 MB, under max_state_bytes_per_network.
TOPIC_QUEUE_BYTES = LIVE_SUBSCRIPTION_MESSAGES * 128


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def check_header_values(frame: Frame, max_value_bytes: int, max_destination_bytes: int) -> None:
    """Refused if a header value of ``frame`` is too long: a destination name past
    ``max_destination_bytes``, any other past ``max_value_bytes``."""
    for name, value in frame.headers:
        if name == "destination":
            check_destination_name(value, max_destination_bytes)
        elif len(value) > max_value_bytes // 4 and utf8_len(value) > max_value_bytes:
            raise Refused(
                codes.HEADER_VALUE_TOO_LONG,
                f"the value of the {name[:64]!r} header is {utf8_len(value)} bytes long; at most "
                f"{max_value_bytes} (max_header_value_bytes)",
            )


def check_destination_name(destination: str, max_bytes: int) -> None:
    if len(destination) > max_bytes // 4 and utf8_len(destination) > max_bytes:
        raise Refused(
            codes.DESTINATION_NAME_TOO_LONG,
            f"destination {destination[:64]!r}... is {utf8_len(destination)} bytes long; at most "
            f"{max_bytes} (max_destination_name_bytes)",
        )


def subscription_bytes(destination: str, subscription_id: str) -> int:
    """What a SUBSCRIBE holds; one to a topic also holds a queue of its own, of up to
    ``LIVE_SUBSCRIPTION_MESSAGES`` copies (``topics.py``), charged in full."""
    held = SUBSCRIPTION_BYTES + utf8_len(destination) + utf8_len(subscription_id)
    return held + TOPIC_QUEUE_BYTES if destination.startswith(TOPIC_PREFIX) else held


def transaction_bytes(name: str) -> int:
    return TRANSACTION_BYTES + utf8_len(name)


class StateAccount:
    """What one connection's subscriptions and open transactions hold, charged to its own
    budget and to the node's."""

    def __init__(self, budget: ByteBudget, per_connection: int) -> None:
        self.budget = budget
        self.per_connection = per_connection
        self.network = LOCAL  # the client's network, once connected
        self.held = 0

    def charge(self, nbytes: int, what: str) -> None:
        """Hold ``nbytes`` more for ``what`` (a SUBSCRIBE, ...), or Refused: nothing held."""
        if self.held + nbytes > self.per_connection:
            raise Refused(
                codes.CONNECTION_STATE_LIMIT,
                f"{what} would make this connection's subscriptions and open transactions hold "
                f"{self.held + nbytes} bytes; at most {self.per_connection} "
                "(max_state_bytes_per_connection): unsubscribe or commit first",
            )
        refused_by = self.budget.take(self.network, nbytes)
        if refused_by == "network":
            raise Refused(
                codes.NETWORK_STATE_LIMIT,
                f"{what} would make the subscriptions and open transactions of the connections "
                f"from {self.network} hold more than {self.budget.per_network} bytes "
                "(max_state_bytes_per_network)",
            )
        if refused_by == "total":
            raise Refused(
                codes.NETWORK_STATE_LIMIT,
                f"{what} would make the subscriptions and open transactions of every "
                f"connection hold more than {self.budget.total} bytes (max_state_bytes)",
            )
        self.held += nbytes

    def refund(self, nbytes: int) -> None:
        given = min(nbytes, self.held)
        self.held -= given
        self.budget.give(self.network, given)

    def close(self) -> None:
        """The connection is gone: everything it held is free."""
        self.refund(self.held)
