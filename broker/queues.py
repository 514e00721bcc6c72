"""Queues and subscriptions in memory: what is ready, who gets it next, what is unacknowledged.

No I/O and no asyncio: the broker decides when to dispatch and journals the
ACKs; this module only keeps the books. A message leaves ``ready`` when it is
delivered and lives in its subscription's ``unacked`` until the client
acknowledges it; when the subscription goes away (UNSUBSCRIBE, disconnect)
or the client NACKs, the broker gets it back and either requeues it (in its
original order, marked redelivered) or, past the redelivery limit, moves it to
a dead-letter queue. A destination with no message and no subscription is
forgotten, so names a client used once cost nothing afterwards.
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from primacy.broker.message_ids import CLIENT_ID_HEADER
from primacy.store.state import DESTINATION, MESSAGE_ID, SEQUENCE, PendingMessage


class AckMode(enum.StrEnum):
    AUTO = "auto"
    CLIENT = "client"  # an ACK acknowledges every earlier delivery of the subscription too
    CLIENT_INDIVIDUAL = "client-individual"


class QueuedMessage(NamedTuple):
    """One stored message. ``body is None`` means read it from the journal when delivered.

    Queues hold it as a ``HeldMessage`` until it is delivered (below). Only ``order`` orders
    it (``__lt__``).
    """

    order: int  # position in its queue: journal order, recovered messages first
    destination: str
    message_id: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    journal_location: PendingMessage | None = None
    redelivered: bool = False
    # Times it came back unacknowledged on this master (recovered messages start at 0).
    returns: int = 0

    @classmethod
    def recovered(cls, pending: PendingMessage) -> QueuedMessage:
        """A message pending in the journal a new master recovered: in journal order, its body
        read from the journal when its turn comes, marked redelivered."""
        return cls(
            pending[SEQUENCE],
            pending[DESTINATION],
            pending[MESSAGE_ID],
            journal_location=pending,
            redelivered=True,
        )

    def __lt__(self, other: tuple[object, ...]) -> bool:
        # The other's order only: a tie must not go on to compare bodies or locations.
        return self.order < cast(int, other[0])

    @property
    def shown_id(self) -> str:
        """The ``message-id`` consumers see: the client's own, where the journal's is scoped
        by login (``message_ids.py``)."""
        for key, value in self.headers:
            if key == CLIENT_ID_HEADER:
                return value
        return self.message_id


@dataclass(eq=False)
class Subscription:
    """One SUBSCRIBE of one connection. ``owner`` is the connection (opaque here)."""

    owner: object
    subscription_id: str
    destination: str
    ack_mode: AckMode
    prefetch: int
    unacked: OrderedDict[str, QueuedMessage] = field(default_factory=OrderedDict)
    auto_acks_in_flight: int = 0  # auto-mode deliveries whose ACK is not yet journaled
    # A STOMP 1.0 SUBSCRIBE without ``id``: the destination names it, MESSAGEs carry no
    # ``subscription`` header (the 1.0 specification sends one only when the id was given).
    implicit_id: bool = False
    # A topic's subscription: the topic (MESSAGE frames name it); ``destination`` is then the
    # subscription's own queue (``topics.py``).
    topic: str | None = None

    def has_room(self) -> bool:
        return len(self.unacked) + self.auto_acks_in_flight < self.prefetch


HeldMessage = tuple[
    int, str, str, tuple[tuple[str, str], ...], bytes | None, PendingMessage | None, bool, int
]
"""A ``QueuedMessage`` as its queue holds it until it is delivered: the same fields in a plain
tuple. The collector stops tracking a plain tuple of immutable values once it survived one
collection (never a named tuple's or a dataclass's instance), so a backlog adds nothing to the
scan of a full collection: held as ``QueuedMessage``s, 180 000 messages (with their
``PendingMessage``s) made the master's full collections 260 ms long, past the lease check's
keepalive (docs/benchmarks.md, "The soak to a million"). Plain tuples compare field by field:
``order`` decides, as it is unique within one queue (journal order; a topic's copies go to a
queue each; a message comes back only after it left)."""


def hold(message: QueuedMessage) -> HeldMessage:
    return cast(HeldMessage, tuple(message))


def unhold(held: HeldMessage) -> QueuedMessage:
    return QueuedMessage._make(held)


@dataclass
class DestinationQueue:
    """The ready messages of one destination, in order, and its subscriptions."""

    name: str
    subscriptions: list[Subscription] = field(default_factory=list)
    next_index: int = 0  # round-robin position
    _ready: list[HeldMessage] = field(default_factory=list)  # a heap: least order first

    def push(self, message: QueuedMessage) -> None:
        heapq.heappush(self._ready, hold(message))

    def head(self) -> QueuedMessage | None:
        """The ready message delivered next; None with none."""
        return unhold(self._ready[0]) if self._ready else None

    def head_order(self) -> int | None:
        return self._ready[0][0] if self._ready else None

    def drop_head(self) -> None:
        heapq.heappop(self._ready)

    def ready_count(self) -> int:
        return len(self._ready)

    def ready_messages(self) -> Iterator[QueuedMessage]:
        """Every ready message, in no particular order."""
        return map(unhold, self._ready)

    def ready_with_orders(self, orders: set[int]) -> list[QueuedMessage]:
        return [unhold(held) for held in self._ready if held[0] in orders]

    def take_ready(self) -> list[QueuedMessage]:
        """Every ready message, which leaves the queue."""
        held, self._ready = self._ready, []
        return list(map(unhold, held))

    def remove_ready(self, orders: set[int]) -> None:
        self._ready = [held for held in self._ready if held[0] not in orders]
        heapq.heapify(self._ready)


class QueueBook:
    """Every destination's queue; the one place deliveries are chosen."""

    def __init__(self, ack_id_prefix: str = "") -> None:
        self.queues: dict[str, DestinationQueue] = {}
        # Ack ids carry the epoch: a client's stale id from an earlier master never
        # names a delivery of this one.
        self._ack_id_prefix = ack_id_prefix
        self._ack_ids = itertools.count(1)

    def queue(self, destination: str) -> DestinationQueue:
        found = self.queues.get(destination)
        if found is None:
            found = self.queues[destination] = DestinationQueue(destination)
        return found

    def add(self, message: QueuedMessage) -> None:
        """A message became durable (or was recovered): make it ready, keeping order."""
        self.queue(message.destination).push(message)

    def has_subscriptions(self, destination: str) -> bool:
        queue = self.queues.get(destination)
        return queue is not None and bool(queue.subscriptions)

    def subscribe(self, subscription: Subscription) -> None:
        self.queue(subscription.destination).subscriptions.append(subscription)

    def unsubscribe(self, subscription: Subscription) -> list[QueuedMessage]:
        """Remove it; its unacknowledged messages are returned (``requeue`` or dead-letter them)."""
        queue = self.queues.get(subscription.destination)
        if queue is not None and subscription in queue.subscriptions:
            queue.subscriptions.remove(subscription)
        returned = list(subscription.unacked.values())
        subscription.unacked.clear()
        return returned

    def requeue(self, message: QueuedMessage) -> None:
        """A message back from a consumer: ready again in its old place, marked redelivered."""
        self.add(message._replace(redelivered=True, returns=message.returns + 1))

    def remove_ready(self, destination: str, orders: set[int]) -> None:
        """Take these messages out of ``destination``'s ready ones (expired, say)."""
        queue = self.queues.get(destination)
        if queue is not None:
            queue.remove_ready(orders)

    def forget_if_unused(self, destination: str) -> None:
        queue = self.queues.get(destination)
        if queue is not None and not queue.ready_count() and not queue.subscriptions:
            del self.queues[destination]

    def deliveries(
        self,
        destination: str,
        can_send: Callable[[Subscription], bool],
        can_deliver: Callable[[QueuedMessage], bool],
    ) -> Iterator[tuple[Subscription, QueuedMessage, str]]:
        """Take ready messages round-robin over subscriptions with room; yields (sub, msg, ack id).

        ``can_send`` lets the caller skip a subscription whose connection is
        not writable right now; ``can_deliver`` stops at a message the caller
        cannot deliver yet (its body is still being read), keeping queue order.
        The caller must deliver each yielded message.
        """
        queue = self.queues.get(destination)
        if queue is None:
            return
        while queue.subscriptions and (message := queue.head()) is not None:
            if not can_deliver(message):
                return
            chosen = self._next_with_room(queue, can_send)
            if chosen is None:
                return
            queue.drop_head()
            ack_id = f"{self._ack_id_prefix}{next(self._ack_ids)}"
            if chosen.ack_mode is AckMode.AUTO:
                chosen.auto_acks_in_flight += 1
            else:
                chosen.unacked[ack_id] = message
            yield chosen, message, ack_id

    def _next_with_room(
        self, queue: DestinationQueue, can_send: Callable[[Subscription], bool]
    ) -> Subscription | None:
        count = len(queue.subscriptions)
        for step in range(count):
            candidate = queue.subscriptions[(queue.next_index + step) % count]
            if candidate.has_room() and can_send(candidate):
                queue.next_index = (queue.next_index + step + 1) % count
                return candidate
        return None

    @staticmethod
    def acknowledge(subscription: Subscription, ack_id: str) -> list[QueuedMessage]:
        """Messages an ACK of ``ack_id`` settles (cumulative in client mode); [] if unknown."""
        if ack_id not in subscription.unacked:
            return []
        if subscription.ack_mode is AckMode.CLIENT_INDIVIDUAL:
            return [subscription.unacked.pop(ack_id)]
        settled = []
        while subscription.unacked:
            key, message = subscription.unacked.popitem(last=False)
            settled.append(message)
            if key == ack_id:
                break
        return settled

    def reject(self, subscription: Subscription, ack_id: str) -> list[QueuedMessage]:
        """A NACK: the messages it returns (cumulative in client mode); ``requeue`` them."""
        return self.acknowledge(subscription, ack_id)

    def waits_for(self, destination: str, can_deliver: Callable[[QueuedMessage], bool]) -> bool:
        """Would a subscriber of ``destination`` get a message once its head can be delivered?"""
        queue = self.queues.get(destination)
        if queue is None or not queue.subscriptions:
            return False
        head = queue.head()
        return head is not None and not can_deliver(head)

    def ready_count(self) -> int:
        return sum(queue.ready_count() for queue in self.queues.values())
