"""Where a message goes after too many redeliveries, and what it carries there.

ActiveMQ's naming: a message of ``/queue/orders`` moves to ``/queue/DLQ.orders``
with its own headers plus ``original-destination`` and
``dlqDeliveryFailureCause``. A message that comes back ``max_redeliveries``
times on a dead-letter queue, or that is too large to move to one, is held
back (``Broker._hold_back``): kept in the journal, delivered again only by the
next master. ActiveMQ discards such a message; dropping one here would lose a
message whose SEND was receipted. See docs/stomp.md, "Redelivery and the
dead-letter queue".
"""

from __future__ import annotations

from primacy.broker.queues import QueuedMessage

DEAD_LETTER_PREFIX = "/queue/DLQ."


def dead_letter_queue(destination: str) -> str:
    return DEAD_LETTER_PREFIX + destination.removeprefix("/queue/")


def is_dead_letter_queue(destination: str) -> bool:
    return destination.startswith(DEAD_LETTER_PREFIX)


def dead_letter_headers(message: QueuedMessage, max_redeliveries: int) -> dict[str, str]:
    """The headers of the copy: the message's own, where it came from, and why it moved."""
    cause = (
        f"came back unacknowledged {message.returns + 1} times "
        f"(max_redeliveries {max_redeliveries})"
    )
    return {
        **dict(message.headers),
        "original-destination": message.destination,
        "dlqDeliveryFailureCause": cause,
    }
