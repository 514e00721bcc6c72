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
from dataclasses import dataclass, field, replace

from primacy.broker.message_ids import CLIENT_ID_HEADER
from primacy.store.state import PendingMessage


class AckMode(enum.StrEnum):
    AUTO = "auto"
    CLIENT = "client"  # an ACK acknowledges every earlier delivery of the subscription too
    CLIENT_INDIVIDUAL = "client-individual"


@dataclass(frozen=True, order=True, slots=True)  # one per unconsumed message: no __dict__
class QueuedMessage:
    """One stored message. ``body is None`` means read it from the journal when delivered."""

    order: int  # position in its queue: journal order, recovered messages first
    destination: str = field(compare=False)
    message_id: str = field(compare=False)
    headers: tuple[tuple[str, str], ...] = field(compare=False, default=())
    body: bytes | None = field(compare=False, default=None)
    journal_location: PendingMessage | None = field(compare=False, default=None)
    redelivered: bool = field(compare=False, default=False)
    # Times it came back unacknowledged on this master (recovered messages start at 0).
    returns: int = field(compare=False, default=0)

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


@dataclass
class DestinationQueue:
    """The ready messages of one destination, in order, and its subscriptions."""

    name: str
    ready: list[QueuedMessage] = field(default_factory=list)  # a heap ordered by ``order``
    subscriptions: list[Subscription] = field(default_factory=list)
    next_index: int = 0  # round-robin position


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
        heapq.heappush(self.queue(message.destination).ready, message)

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
        self.add(replace(message, redelivered=True, returns=message.returns + 1))

    def remove_ready(self, destination: str, orders: set[int]) -> None:
        """Take these messages out of ``destination``'s ready ones (expired, say)."""
        queue = self.queues.get(destination)
        if queue is not None:
            queue.ready = [message for message in queue.ready if message.order not in orders]
            heapq.heapify(queue.ready)

    def forget_if_unused(self, destination: str) -> None:
        queue = self.queues.get(destination)
        if queue is not None and not queue.ready and not queue.subscriptions:
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
        while queue.ready and queue.subscriptions and can_deliver(queue.ready[0]):
            chosen = self._next_with_room(queue, can_send)
            if chosen is None:
                return
            message = heapq.heappop(queue.ready)
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
        return bool(
            queue and queue.ready and queue.subscriptions and not can_deliver(queue.ready[0])
        )

    def ready_count(self) -> int:
        return sum(len(queue.ready) for queue in self.queues.values())
