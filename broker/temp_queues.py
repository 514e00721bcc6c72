"""Temporary queues for request/reply: ``/temp-queue/NAME``, private to the connection that uses
it, gone with that connection.

A connection's ``/temp-queue/NAME`` is the queue ``/remote-temp-queue/<epoch>.<session>.NAME``
(ActiveMQ's rewriting: its ``/temp-queue/`` becomes ``/remote-temp-queue/ID:...`` in the
headers others see). It comes into being when its owner first names it, in a SUBSCRIBE, a SEND,
or the ``reply-to`` header of a SEND, which is rewritten to the full name so the replier can
send to it. Anyone may SEND to a ``/remote-temp-queue/`` name; only the owner may SUBSCRIBE
(``codes.TEMP_QUEUE_NOT_OWNER`` otherwise). A SEND to one that is gone (its connection closed,
or an earlier master made it) is receipted and dropped, counted as ``temp_queue_sends_dropped``:
the requester that would read the reply is gone, and a replier serving many must not be
disconnected for it (RabbitMQ drops such a reply too; ActiveMQ sends an ERROR).

Its messages are journaled like any queue's (resends are recognised, the journal stays the one
record of what was accepted), and settled with ACK records when the queue goes: when its
connection closes, and, for the queues of an earlier master, when a new master starts (their
connections are gone). The epoch in the name keeps a later master's queues from ever taking
an earlier one's name. A connection may hold at most ``max_temp_queues_per_connection``
(``codes.TEMP_QUEUE_LIMIT``), each charged to its state budget (state_limits.py).
"""

from __future__ import annotations

from primacy.broker import codes
from primacy.broker.refusals import Refused
from primacy.broker.state_limits import StateAccount, utf8_len

TEMP_PREFIX = "/temp-queue/"
REMOTE_PREFIX = "/remote-temp-queue/"
REPLY_TO_HEADER = "reply-to"
# What the master holds for one temporary queue besides its name: its entry here and in the
# broker's registry, and a destination queue of its own (as a subscription's, state_limits.py).
TEMP_QUEUE_BYTES = 1024


def is_temporary(destination: str) -> bool:
    return destination.startswith(REMOTE_PREFIX)


class TempQueueRegistry:
    """Every live temporary queue of the serving broker, by full name, and its owner."""

    def __init__(self) -> None:
        self.owners: dict[str, object] = {}
        self.sends_dropped = 0

    def is_live(self, destination: str) -> bool:
        return destination in self.owners


class ConnectionTempQueues:
    """One connection's temporary queues: the names it uses, resolved to full names."""

    def __init__(
        self,
        registry: TempQueueRegistry,
        owner: object,
        prefix: str,
        limit: int,
        state: StateAccount,
    ) -> None:
        self.registry = registry
        self.owner = owner
        self.prefix = prefix  # "/remote-temp-queue/<epoch>.<session>."
        self.limit = limit
        self.state = state
        self.names: list[str] = []

    def resolve(self, destination: str) -> str:
        """The queue ``destination`` names for this connection: its own ``/temp-queue/NAME``
        as the full name (made now if new), anything else unchanged."""
        if not destination.startswith(TEMP_PREFIX):
            return destination
        if len(destination) == len(TEMP_PREFIX):
            raise Refused(codes.UNSUPPORTED_DESTINATION, "a temporary queue needs a name")
        full = self.full_name(destination)
        if full not in self.registry.owners:
            self._create(full)
        return full

    def full_name(self, destination: str) -> str:
        """What ``resolve`` gives, without making the queue."""
        if destination.startswith(TEMP_PREFIX):
            return self.prefix + destination[len(TEMP_PREFIX) :]
        return destination

    def shown_name(self, destination: str) -> str:
        """The ``destination`` of a MESSAGE to this connection: its own temporary queues by the
        name it uses (``/temp-queue/NAME``), as ActiveMQ shows them."""
        if destination.startswith(self.prefix):
            return TEMP_PREFIX + destination[len(self.prefix) :]
        return destination

    def check_subscribe(self, destination: str) -> None:
        """Refused unless this connection owns the temporary queue ``destination``."""
        if is_temporary(destination) and self.registry.owners.get(destination) is not self.owner:
            raise Refused(
                codes.TEMP_QUEUE_NOT_OWNER,
                f"{destination[:100]!r} is another connection's temporary queue (or gone): "
                "only its owner may subscribe; send to it instead",
            )

    def _create(self, full: str) -> None:
        if len(self.names) >= self.limit:
            raise Refused(
                codes.TEMP_QUEUE_LIMIT,
                f"a connection may hold at most {self.limit} temporary queues "
                "(max_temp_queues_per_connection); reuse one, matching replies by correlation-id",
            )
        self.state.charge(TEMP_QUEUE_BYTES + utf8_len(full), f"the temporary queue {full[:64]!r}")
        self.registry.owners[full] = self.owner
        self.names.append(full)

    def close(self) -> list[str]:
        """The connection is gone: its queues leave the registry (the broker settles what they
        hold); returns their names."""
        for name in self.names:
            self.registry.owners.pop(name, None)
        names, self.names = self.names, []
        return names
