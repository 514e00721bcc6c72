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

from primacy.broker.expiry import without_expiry
from primacy.broker.queues import QueuedMessage

DEAD_LETTER_PREFIX = "/queue/DLQ."


def dead_letter_queue(destination: str) -> str:
    return DEAD_LETTER_PREFIX + destination.removeprefix("/queue/")


def is_dead_letter_queue(destination: str) -> bool:
    return destination.startswith(DEAD_LETTER_PREFIX)


def dead_letterable(destination: str) -> bool:
    """A queue's messages may move to its dead-letter queue (not a DLQ's, nor a temporary
    queue's: nobody would read those)."""
    return destination.startswith("/queue/") and not is_dead_letter_queue(destination)


def dead_letter_headers(message: QueuedMessage, cause: str) -> dict[str, str]:
    """The headers of the copy: the message's own (but ``expires``: the copy must not expire
    where it goes, as ActiveMQ's does not), where it came from, and why it moved."""
    return {
        **without_expiry(dict(message.headers)),
        "original-destination": message.destination,
        "dlqDeliveryFailureCause": cause,
    }


def dead_letter_copy_headers(headers: dict[str, str], destination: str) -> dict[str, str]:
    """A SEND already expired when it arrived, stored in its dead-letter queue instead."""
    return {
        **without_expiry(headers),
        "original-destination": destination,
        "dlqDeliveryFailureCause": f"expired (expires {headers.get('expires')}) on arrival",
    }
