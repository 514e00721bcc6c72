"""Topics: each message goes to every subscription present when it is stored; durable ones
keep theirs in the journal while their subscriber is away.

A topic SEND is journaled once, like a queue's, and receipted once journaled; only then is it
handed on (a subscriber never sees a message a failover could lose). Each subscription of a
topic has a queue of its own in the ``QueueBook``, so acknowledgement modes, prefetch,
redelivery and flow control work per subscription exactly as on a queue:

- a **non-durable** subscription's queue (``topic-subscription:N``) lives in memory only: its
  copies share the message's body, their ACKs and deliveries are not journaled, and it ends
  with its subscription. It holds at most ``LIVE_SUBSCRIPTION_MESSAGES`` messages (ready and
  unacknowledged); past that the oldest ready one is dropped (a subscriber that falls that far
  behind loses messages, as it would lose everything sent while disconnected), counted and
  logged once per subscription (``TOPIC_MESSAGES_DROPPED``).
- a **durable** subscription (ActiveMQ's naming: the CONNECT's ``client-id`` and the SUBSCRIBE's
  ``activemq.subscriptionName``) has the journaled queue ``durable:<len>:<client-id>:<name>``:
  a SUBSCRIBE record starts it, every topic SEND after that record is pending for it in the
  journal (``store/state.py``), its ACKs and deliveries are journaled under that name, and an
  UNSUBSCRIBE record (an UNSUBSCRIBE frame with the same name) ends it. It outlives its
  connection and failovers; while nobody is attached it keeps its messages.

Which durable subscriptions get a SEND is decided when the SEND is submitted, the order the
journal applies records in, so the broker's copies and what a new master recovers agree: a
subscription ended and begun again under its name between a SEND's submission and its
journaling is another incarnation, which the journal does not hold that SEND for, and it does
not get it either. A durable copy with an ``expires`` is swept once it passes (dropped and
counted, as a queue's non-persistent message: a subscription has no dead-letter queue), its
subscriber away or not (expiry.py).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from primacy.broker import codes
from primacy.broker.expiry import expires_at_ms
from primacy.broker.message_fates import BrokerFailed
from primacy.broker.queues import DestinationQueue, QueuedMessage, Subscription
from primacy.broker.refusals import Refused
from primacy.store.errors import JournalError
from primacy.store.state import TOPIC_PREFIX

if TYPE_CHECKING:
    from primacy.broker.core import Broker

log = logging.getLogger("primacy.broker")

DURABLE_PREFIX = "durable:"
LIVE_PREFIX = "topic-subscription:"
# The SUBSCRIBE (and UNSUBSCRIBE) headers naming a durable subscription, in the order Artemis
# reads them; ActiveMQ 5 reads ``activemq.subscriptionName`` (and its old misspelling).
SUBSCRIPTION_NAME_HEADERS = (
    "durable-subscriber-name",
    "durable-subscription-name",
    "activemq.subscriptionName",
    "activemq.subcriptionName",
)
CLIENT_ID_HEADER = "client-id"
# A non-durable subscription's messages held at most (state_limits.py charges for them).
LIVE_SUBSCRIPTION_MESSAGES = 64
# Non-durable copies made in one turn of the broker's loop (then its deliveries are written).
FAN_OUT_SLICE = 1000


def is_topic(destination: str) -> bool:
    return destination.startswith(TOPIC_PREFIX)


def is_memory_only(queue_name: str) -> bool:
    """A non-durable subscription's queue: nothing of it is journaled."""
    return queue_name.startswith(LIVE_PREFIX)


def durable_queue_name(client_id: str, subscription_name: str) -> str:
    """The journal's name for a durable subscription: unambiguous for any two names (the
    client id's length comes first), and never a destination a client can send to."""
    return f"{DURABLE_PREFIX}{len(client_id)}:{client_id}:{subscription_name}"


def subscription_name(headers: Iterable[tuple[str, str]]) -> str | None:
    """The durable subscription a SUBSCRIBE or UNSUBSCRIBE names, if any."""
    found = dict(headers)
    for header in SUBSCRIPTION_NAME_HEADERS:
        value = found.get(header)
        if value:
            return value
    return None


def durable_queue_for(client_id: str | None, name: str, command: str) -> str:
    if not client_id:
        raise Refused(
            codes.DURABLE_NEEDS_CLIENT_ID,
            f"a durable subscription ({command} with activemq.subscriptionName) needs the "
            "client-id header on CONNECT: the two together name it",
        )
    return durable_queue_name(client_id, name)


class Topics:
    """Every topic's subscriptions: durable ones (journaled) and non-durable ones (memory)."""

    def __init__(self, recovered: dict[str, tuple[str, ...]]) -> None:
        # topic -> its durable subscriptions' queue names, in the order they began
        self.durables: dict[str, dict[str, None]] = {
            t: dict.fromkeys(q) for t, q in recovered.items()
        }
        self.topic_of: dict[str, str] = {q: t for t, qs in recovered.items() for q in qs}
        self.attached: set[str] = set()  # durable queues a connection consumes from now
        # How often each durable queue name was begun on this master (recovered ones: 0).
        self._incarnations: dict[str, int] = {}
        # topic -> the queues of its non-durable subscriptions (by name)
        self.live: dict[str, dict[str, DestinationQueue]] = {}
        # Topic messages not yet offered to every non-durable subscription: a slice at a time.
        self._fan_out: deque[tuple[QueuedMessage, Iterator[tuple[str, DestinationQueue]]]] = deque()
        self._numbers = itertools.count(1)
        self.dropped = 0  # non-durable copies dropped for a subscriber too far behind
        # When each topic message held for a durable subscription was stored (wall clock s),
        # by order; recovered ones are not here and count from when this master started.
        self._stored_at: dict[int, float] = {}
        self._started_s = time.time()
        self._warned: set[str] = set()

    def durable_queues(self, topic: str) -> tuple[tuple[str, int], ...]:
        """The durable subscriptions a SEND to ``topic`` submitted now is pending for, each
        with its incarnation (``publish`` skips one ended, begun again or not, since)."""
        queues = self.durables.get(topic)
        if not queues:
            return ()
        return tuple((queue, self._incarnations.get(queue, 0)) for queue in queues)

    @staticmethod
    def settled_at_once(loop: asyncio.AbstractEventLoop) -> asyncio.Future[int]:
        """A non-durable copy's ACK: nothing to journal, done now."""
        done: asyncio.Future[int] = loop.create_future()
        done.set_result(0)
        return done

    # ---- subscribing ---------------------------------------------------------------

    def attach(
        self,
        broker: Broker,
        subscription: Subscription,
        client_id: str | None,
        name: str | None,
    ) -> list[asyncio.Future[int]]:
        """Point a SUBSCRIBE to ``subscription.destination`` (a topic) at its own queue;
        returns the journal writes its RECEIPT waits for (a new durable subscription's)."""
        topic = subscription.destination
        subscription.topic = topic
        if name is None:
            queue = f"{LIVE_PREFIX}{next(self._numbers)}"
            self.live.setdefault(topic, {})[queue] = broker.book.queue(queue)
            subscription.destination = queue
            return []
        queue = durable_queue_for(client_id, name, "SUBSCRIBE")
        if queue in self.attached:
            raise Refused(
                codes.DURABLE_IN_USE,
                f"durable subscription {name[:100]!r} of client id {client_id!r} has a "
                "subscriber already",
            )
        writes: list[asyncio.Future[int]] = []
        if self.topic_of.get(queue) != topic:
            if queue in self.topic_of:  # ActiveMQ's rule: another topic replaces it
                writes.append(self.end(broker, queue))
            writes.append(_journal_subscription(broker, topic, queue, ends=False))
            self._incarnations[queue] = self._incarnations.get(queue, 0) + 1
            self.durables.setdefault(topic, {})[queue] = None
            self.topic_of[queue] = topic
        self.attached.add(queue)
        subscription.destination = queue
        return writes

    def detach(self, broker: Broker, subscription: Subscription) -> None:
        """The subscription ended (UNSUBSCRIBE, disconnect); its unacknowledged messages were
        given back already. A durable one keeps its queue; a non-durable one's is dropped."""
        queue = subscription.destination
        self.attached.discard(queue)
        if not is_memory_only(queue):
            return
        topic = subscription.topic or ""
        live = self.live.get(topic)
        if live is not None:
            live.pop(queue, None)
            if not live:
                del self.live[topic]
        broker.book.queues.pop(queue, None)
        self._warned.discard(queue)

    def end(self, broker: Broker, queue: str) -> asyncio.Future[int]:
        """End durable subscription ``queue``: journal it, drop what it held."""
        topic = self.topic_of.pop(queue)
        queues = self.durables[topic]
        del queues[queue]
        if not queues:
            del self.durables[topic]
        written = _journal_subscription(broker, topic, queue, ends=True)
        self._incarnations[queue] = self._incarnations.get(queue, 0) + 1
        held = broker.book.queues.pop(queue, None)
        for message in held.ready_messages() if held is not None else ():
            _forget(broker, message)
        broker.bodies.forget(queue)  # those of its messages still to be read from the journal
        # Held back (message_fates.py) on this subscription: nobody will settle those either.
        gone = [m for m in broker.held_back if m.destination == queue]
        if gone:
            broker.held_back[:] = [m for m in broker.held_back if m.destination != queue]
            for message in gone:
                _forget(broker, message)
        return written

    def figures(self, broker: Broker) -> tuple[int, int, float]:
        """/status: the durable subscriptions, the messages held for those whose subscriber
        is away, and the age in seconds of the oldest of those (0 with none)."""
        held = 0
        oldest_away: int | None = None
        oldest_any: int | None = None
        for queue in self.topic_of:
            waiting = broker.book.queues.get(queue)
            if waiting is None:
                continue
            heads = [m.order for s in waiting.subscriptions for m in s.unacked.values()]
            head = waiting.head_order()
            if head is not None:
                heads.append(head)
            if oldest_any is not None:
                heads.append(oldest_any)
            oldest_any = min(heads, default=None)
            if queue not in self.attached and head is not None:
                held += waiting.ready_count()
                oldest_away = head if oldest_away is None else min(oldest_away, head)
        # Times of messages no durable subscription holds any more are not wanted again.
        # (In order: publish comes in journal order.)
        for order in list(
            itertools.takewhile(lambda o: oldest_any is None or o < oldest_any, self._stored_at)
        ):
            del self._stored_at[order]
        if oldest_away is None:
            return len(self.topic_of), held, 0.0
        stored_s = self._stored_at.get(oldest_away, self._started_s)
        return len(self.topic_of), held, max(0.0, time.time() - stored_s)

    # ---- publishing -----------------------------------------------------------------

    def publish(
        self,
        broker: Broker,
        message: QueuedMessage,
        durable: tuple[tuple[str, int], ...],
    ) -> None:
        """A topic SEND is journaled: queue a copy for each subscription. The non-durable ones
        get theirs ``FAN_OUT_SLICE`` at a time, one slice a turn of the loop, so a topic of
        10 000 subscribers does not hold the loop for the whole fan-out of a message (each
        subscription still gets its messages in order: the queues are ordered by ``order``)."""
        expires_ms = expires_at_ms(message.headers) if durable else None
        if durable:
            self._stored_at[message.order] = time.time()
        for queue, incarnation in durable:
            # Not ended (and begun again) since the SEND was submitted: the journal holds it.
            if queue in self.topic_of and self._incarnations.get(queue, 0) == incarnation:
                if expires_ms is not None:
                    broker.expiry.track(message.order, queue, expires_ms)
                broker.keep(_copy(message, queue), counted=False)
        live = self.live.get(message.destination)
        if live:
            if not self._fan_out:
                broker.loop.call_soon(self._offer_slice, broker)
            self._fan_out.append((message, iter(list(live.items()))))

    def _offer_slice(self, broker: Broker) -> None:
        budget = FAN_OUT_SLICE
        while self._fan_out and budget > 0 and broker.failure is None:
            message, queues = self._fan_out[0]
            for queue, held in itertools.islice(queues, budget):
                budget -= 1
                self._offer(broker, queue, held, message)
            if budget > 0:  # that message is offered to all
                self._fan_out.popleft()
        if self._fan_out and broker.failure is None:
            broker.loop.call_soon(self._offer_slice, broker)

    def _offer(
        self, broker: Broker, queue: str, held: DestinationQueue, message: QueuedMessage
    ) -> None:
        holding = held.ready_count()
        for subscriber in held.subscriptions:  # one, until it ends
            holding += len(subscriber.unacked) + subscriber.auto_acks_in_flight
        if holding >= LIVE_SUBSCRIPTION_MESSAGES:
            self.dropped += 1
            if queue not in self._warned:
                self._warned.add(queue)
                log.warning(
                    "%s: a subscriber of %s holds %d messages it has not taken; it loses the "
                    "oldest from now on (counted, logged once per subscription)",
                    codes.title(codes.TOPIC_MESSAGES_DROPPED),
                    message.destination,
                    LIVE_SUBSCRIPTION_MESSAGES,
                )
            if not held.ready_count():
                return  # every message it holds is delivered, unacknowledged: this one goes
            held.drop_head()  # the oldest not yet delivered
        held.push(_copy(message, queue))
        broker.schedule_dispatch(queue)


def _journal_subscription(
    broker: Broker, topic: str, queue: str, *, ends: bool
) -> asyncio.Future[int]:
    """Journal that a durable subscription begins or ends; BrokerFailed if the journal failed."""
    broker._require_running()
    try:
        submitted = broker.store.append_subscription(topic, queue, ends=ends)
    except JournalError as error:
        broker.fail(f"{type(error).__name__}: {error}")
        raise BrokerFailed(str(error)) from None
    return broker._watch(submitted, lambda ok: None)


def _forget(broker: Broker, message: QueuedMessage) -> None:
    """A ready copy of a durable subscription that ended: nobody will settle it."""
    if message.journal_location is None:
        broker.body_memory_bytes -= len(message.body or b"")
    broker.expiry.forget(message.order, message.destination)
    broker.backlog.removed(message.destination)


def _copy(message: QueuedMessage, queue: str) -> QueuedMessage:
    return QueuedMessage(message.order, queue, message.message_id, message.headers, message.body)
