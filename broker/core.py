"""The broker on its event loop: journal every SEND and ACK, fill queues, dispatch, fail fast.

Everything here runs on the service's one asyncio loop, so nothing needs a lock. A message
becomes deliverable only once the journal completed its SEND (durable per the sync policy,
fencing check passed): a consumer never sees a message a failover could lose. When the journal
fails (fenced, write failed, closed under us) the broker stops at once: every connection is
aborted without another receipt, the listener is closed and ``on_fatal`` is called.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol

from primacy.broker import codes
from primacy.broker.authentication import Authenticator, LoginThrottle
from primacy.broker.backlog import Backlog
from primacy.broker.body_loader import BodyLoader
from primacy.broker.config import BrokerConfig
from primacy.broker.counters import Counters
from primacy.broker.dead_letter import is_dead_letter_queue
from primacy.broker.expiry import ExpiryWatch, expires_at_ms, has_expired
from primacy.broker.journal_waits import JournalWaits
from primacy.broker.message_fates import BrokerFailed, MessageFates
from primacy.broker.message_ids import generated_id
from primacy.broker.queues import AckMode, QueueBook, QueuedMessage, Subscription
from primacy.broker.refusals import Refused
from primacy.broker.temp_queues import TempQueueRegistry, is_temporary
from primacy.broker.tls import ServerTls
from primacy.broker.topics import Topics, is_memory_only, is_topic
from primacy.store import format as fmt
from primacy.store.errors import JournalError, MessageTooLarge
from primacy.store.journal import JournalStore

log = logging.getLogger("primacy.broker")


# asyncio's own read size. A plain Protocol gets a fresh bytes object of this size per
# read, shrunk to what arrived: 13 us of allocation per 1 KiB SEND on this machine.
READ_BUFFER_BYTES = 256 * 1024


class Peer(Protocol):
    """What the broker needs from a client connection."""

    @property
    def writable(self) -> bool: ...

    def deliver(self, subscription: Subscription, message: QueuedMessage, ack_id: str) -> None: ...

    def abort(self, code: str, detail: str) -> None: ...


class Broker(MessageFates):
    """Queues, dedupe and the journal, shared by every connection of one service; what becomes
    of a message that cannot be delivered is ``MessageFates``'s (``message_fates.py``)."""

    def __init__(
        self, store: JournalStore, config: BrokerConfig, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.store = store
        self.config = config
        self.loop = loop
        self.book = QueueBook(ack_id_prefix=f"{store.epoch}-")
        self.counters = Counters()
        # Journal writes complete on the writer thread; their waiters here, once per batch.
        self.journal_waits = JournalWaits(loop)
        store.add_completion_listener(self.journal_waits.batch_done)
        self.peers: set[Peer] = set()
        # Every connection's socket reads land here (connection.py, ``get_buffer``) and are
        # copied out at once: all run on this loop's one thread, so one buffer serves them.
        self.read_buffer = memoryview(bytearray(READ_BUFFER_BYTES))
        self.failure: str | None = None
        self.on_fatal: Callable[[str], None] | None = None
        self.on_stop_listening: Callable[[], None] | None = None
        # (destination, message id) of each SEND not yet durable: a resend of one is receipted
        # when the first copy is. Which resends to drop is the journal's one window's call.
        self._in_flight_sends: dict[tuple[str, str], asyncio.Future[int]] = {}
        self._commit_due = False  # a call of _commit_deferred is scheduled on the loop
        # Bodies held for stored messages until acked (body_loader.py's read-backs aside).
        self.body_memory_bytes = 0
        self._dispatch_due: set[str] = set()
        # Poison messages no longer delivered by this master (``_hold_back``); still pending.
        self.held_back: list[QueuedMessage] = []
        # Unacknowledged messages, counted from the SEND's submission to its ACK's.
        self.backlog = Backlog(config.max_destination_messages, config.max_pending_messages, loop)
        # Checks CONNECT's login against the users file, if there is one (an unusable file
        # raises here: a master that cannot check logins must not serve everyone instead).
        self.authenticator = (
            Authenticator(config.stomp_users) if config.stomp_users is not None else None
        )
        self.logins = LoginThrottle()
        self.tls = (
            ServerTls(config.stomp_tls_cert, config.stomp_tls_key, config.stomp_tls_ca)
            if config.stomp_tls_cert is not None and config.stomp_tls_key is not None
            else None
        )
        self.bodies = BodyLoader(store, loop, self.schedule_dispatch)
        # Stored messages with an ``expires`` header, swept once past it (expiry.py).
        self.expiry = ExpiryWatch(loop, self._expire_due)
        # Live temporary queues (temp_queues.py); an earlier master's went with its connections.
        self.temp_queues = TempQueueRegistry()
        # A failover may have delivered these already: consumers see them as redelivered.
        recovered = [QueuedMessage.recovered(pending) for pending in store.recovered_pending]
        for message in recovered:
            self.book.add(message)
            self.backlog.added(message.destination)
        self.bodies.recovered(recovered)
        self.delete_temp_queues([name for name in self.book.queues if is_temporary(name)])
        self.topics = Topics(store.recovered_durables)
        self._order = itertools.count(store.recovered_last_sequence + 1)

    # ---- sending -------------------------------------------------------------

    def new_message_id(self) -> str:
        """An id for a SEND without one: new, and unguessable (``message_ids.py``)."""
        return generated_id(self.store.config.node_id, self.store.epoch)

    def encode_send(
        self, destination: str, message_id: str, headers: dict[str, str], body: bytes
    ) -> fmt.EncodedRecord:
        """The journal record of a SEND; a message the journal would refuse is refused now,
        before anything of it is queued (ahead of a transaction's COMMIT, say)."""
        try:
            return self.store.encode_send(destination, message_id, body, headers)
        except MessageTooLarge as error:
            raise Refused(codes.MESSAGE_TOO_LARGE, f"{error}; nothing was stored") from None

    def send(
        self,
        destination: str,
        message_id: str,
        headers: dict[str, str],
        body: bytes,
        record: fmt.EncodedRecord | None = None,
        *,
        new_id: bool = False,
    ) -> asyncio.Future[int]:
        """Journal a SEND (or recognise a resend); the future completes when it may be receipted.

        ``record``: this SEND's ``encode_send``, when the caller checked it already.
        ``new_id``: the broker made ``message_id`` just now, so it cannot be a resend.
        """
        self._require_running()
        key = (destination, message_id)
        if not new_id and self.store.is_duplicate(destination, message_id):
            self.counters.duplicates_dropped += 1
            original = self._in_flight_sends.get(key)
            if original is not None:
                return original  # receipt the resend when the first copy is durable
            done: asyncio.Future[int] = self.loop.create_future()
            done.set_result(0)
            return done
        if record is None:
            record = self.encode_send(destination, message_id, headers, body)
        try:
            submitted = self.store.submit_send(record, destination, message_id, defer=True)
        except JournalError as error:  # fenced or failed before: refuses every write now
            self.fail(f"{type(error).__name__}: {error}")
            raise BrokerFailed(str(error)) from None
        message = QueuedMessage(
            next(self._order), destination, message_id, tuple(headers.items()), body
        )
        if is_topic(destination):  # its copies are counted (backlog) once it is stored
            durable = self.topics.durable_queues(destination)  # as the journal will apply it
            written = self._watch(submitted, lambda ok: self._published(message, durable, ok))
        else:
            written = self._watch(submitted, lambda ok: self._stored(message, ok))
            self.backlog.added(destination)
        self._in_flight_sends[key] = written
        return written

    def _stored(self, message: QueuedMessage, ok: bool) -> None:
        self._in_flight_sends.pop((message.destination, message.message_id), None)
        if not ok:
            return  # _journaled failed the broker already
        self.counters.messages_in += 1
        expires_ms = expires_at_ms(message.headers)
        if expires_ms is not None:
            self.expiry.track(message.order, message.destination, expires_ms)
        self.keep(message)

    def _published(
        self, message: QueuedMessage, durable: tuple[tuple[str, int], ...], ok: bool
    ) -> None:
        self._in_flight_sends.pop((message.destination, message.message_id), None)
        if ok:
            self.counters.messages_in += 1
            self.topics.publish(self, message, durable)

    def keep(self, message: QueuedMessage, *, counted: bool = True) -> None:
        """A stored message (or a durable subscription's copy) joins its queue; ``counted``:
        the backlog counted it when it was submitted."""
        if not counted:
            self.backlog.added(message.destination)
        size = len(message.body or b"")
        location = None
        if self.body_memory_bytes + size > self.config.max_body_memory_bytes:
            # Over the limit: keep its place in the journal, not its body (none yet under no_sync).
            location = self.store.location_of(message.destination, message.message_id)
        if location is None:
            self.body_memory_bytes += size
        if is_temporary(message.destination) and not self.temp_queues.is_live(message.destination):
            self._settle_quietly(message)  # its connection closed while it was being stored
            return
        if location is not None:
            message = QueuedMessage(
                message.order, message.destination, message.message_id, journal_location=location
            )
            self.bodies.in_journal(message)
        self.book.add(message)
        if self.book.has_subscriptions(message.destination):
            # Without one the message waits: a SUBSCRIBE schedules its own dispatch.
            self.schedule_dispatch(message.destination)

    # ---- acknowledging -------------------------------------------------------

    def settle(self, messages: list[QueuedMessage]) -> list[asyncio.Future[int]]:
        """Journal an ACK for each message; futures complete when they are durable."""
        self._require_running()
        futures = []
        for message in messages:
            if is_memory_only(message.destination):  # a non-durable topic subscription's
                futures.append(self.topics.settled_at_once(self.loop))
                continue
            try:
                submitted = self.store.append_ack(
                    message.destination, message.message_id, defer=True
                )
            except JournalError as error:
                self.fail(f"{type(error).__name__}: {error}")
                raise BrokerFailed(str(error)) from None
            if message.journal_location is None:  # its body was counted when it was stored
                self.body_memory_bytes -= len(message.body or b"")
            self.expiry.forget(message.order, message.destination)
            self.backlog.removed(message.destination)
            futures.append(self._watch(submitted, self._count_ack))
        for destination in {message.destination for message in messages}:
            self.schedule_dispatch(destination)  # the subscription has room again
        return futures

    def _count_ack(self, ok: bool) -> None:
        if ok:
            self.counters.messages_acked += 1

    def requeue(self, messages: list[QueuedMessage]) -> None:
        """Messages back from a consumer (NACK, unsubscribe, disconnect): ready again, or,
        once one came back ``max_redeliveries`` times, moved to its dead-letter queue; one
        that cannot move (it is on one already, or too large for one) is held back."""
        for message in messages:
            if message.returns < self.config.max_redeliveries:
                self.book.requeue(message)
            elif is_temporary(message.destination):
                self._settle_quietly(message)  # no dead-letter queue: dropped, as ActiveMQ's are
            elif is_memory_only(message.destination):
                continue  # a non-durable subscriber's copy: nothing stored to move or keep
            elif is_dead_letter_queue(message.destination):
                self._hold_back(
                    message,
                    f"came back unacknowledged {message.returns + 1} times on a dead-letter "
                    f"queue (max_redeliveries {self.config.max_redeliveries})",
                )
            else:
                self._dead_letter(message, self._redelivery_cause(message))
        for destination in {message.destination for message in messages}:
            self.schedule_dispatch(destination)

    # ---- subscriptions and dispatch -------------------------------------------

    def delete_temp_queues(self, names: list[str]) -> None:
        """Temporary queues whose connection is gone: what they hold is settled (after
        ``remove_peer`` gave their deliveries back), so no master delivers it again."""
        for name in names:
            queue = self.book.queues.get(name)
            if queue is None:
                continue
            held = queue.take_ready()
            self.bodies.forget(name)
            self.book.forget_if_unused(name)
            for message in held:  # a failed journal keeps them: the next master settles them
                self._settle_quietly(message)

    def subscribe(self, subscription: Subscription) -> None:
        self.book.subscribe(subscription)
        self.schedule_dispatch(subscription.destination)

    def unsubscribe(self, subscription: Subscription) -> None:
        self.requeue(self.book.unsubscribe(subscription))
        if subscription.topic is not None:
            self.topics.detach(self, subscription)
        self.book.forget_if_unused(subscription.destination)
        if subscription.destination in self.book.queues:
            self.schedule_dispatch(subscription.destination)

    def schedule_dispatch(self, destination: str) -> None:
        if not self._dispatch_due:
            self.loop.call_soon(self._dispatch)
        self._dispatch_due.add(destination)

    def peer_writable(self) -> None:
        """A connection drained its socket buffer: it may take deliveries again."""
        for destination in self.book.queues:
            self.schedule_dispatch(destination)

    def _dispatch(self) -> None:
        due, self._dispatch_due = self._dispatch_due, set()
        if self.failure is not None:
            return
        for destination in due:
            has_body = self.bodies.has_body
            deliveries = self.book.deliveries(destination, _owner_writable, has_body)
            for subscription, message, ack_id in deliveries:
                loaded = self.bodies.take(message)
                expired = loaded is not None and has_expired(loaded.headers)
                if loaded is None or expired:
                    if subscription.ack_mode is AckMode.AUTO:
                        subscription.auto_acks_in_flight -= 1
                    subscription.unacked.pop(ack_id, None)
                    if loaded is not None:
                        self._expire(loaded)
                    continue
                if subscription.ack_mode is not AckMode.AUTO:
                    subscription.unacked[ack_id] = loaded
                owner: Peer = subscription.owner  # type: ignore[assignment]
                owner.deliver(subscription, loaded, ack_id)
                if not is_memory_only(destination):
                    self._journal_delivery(loaded)
                self.counters.messages_out += 1
                if loaded.redelivered:
                    self.counters.redeliveries += 1
                if subscription.ack_mode is AckMode.AUTO:
                    self._auto_ack(subscription, loaded)
            if self.book.waits_for(destination, has_body):
                self.bodies.request(destination)  # dispatched again once the bodies are in

    def _journal_delivery(self, message: QueuedMessage) -> None:
        """A DELIVER record for the replay; nobody waits for it, a failure stops the broker."""
        try:
            submitted = self.store.append_delivery(message.destination, message.message_id)
        except JournalError as error:
            self.fail(f"{type(error).__name__}: {error}")
            return
        submitted.add_done_callback(self._check_delivery_journaled)

    def _check_delivery_journaled(self, written: Future[int]) -> None:
        """On the writer's thread (the loop's after an inline commit): only a failure needs the
        loop (cheaper than wrapping each)."""
        error = None if written.cancelled() else written.exception()
        if error is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.fail, f"{type(error).__name__}: {error}")

    def _auto_ack(self, subscription: Subscription, message: QueuedMessage) -> None:
        def done(_: asyncio.Future[int]) -> None:
            subscription.auto_acks_in_flight -= 1
            self.schedule_dispatch(subscription.destination)

        try:
            self.settle([message])[0].add_done_callback(done)
        except BrokerFailed:
            return

    # ---- peers and failure -----------------------------------------------------

    def add_peer(self, peer: Peer) -> None:
        self.peers.add(peer)
        self.counters.connections_total += 1

    def remove_peer(self, peer: Peer, subscriptions: list[Subscription]) -> None:
        self.peers.discard(peer)
        for subscription in subscriptions:
            self.unsubscribe(subscription)

    def _watch(self, written: Future[int], then: Callable[[bool], None]) -> asyncio.Future[int]:
        """The journal's future on this loop. When it ends, a failure stops the broker, then
        ``then(ok)`` runs (``ok``: the write succeeded). One callback for both: each callback
        of an asyncio future is a handle of its own on the loop.

        ``written`` was submitted with ``defer``: the commit is asked for once this turn of
        the loop is over, so the SENDs and ACKs of every connection that was read in it are
        queued by then (a lone one is committed right here, without a hand-off)."""
        if not self._commit_due:
            self._commit_due = True
            self.loop.call_soon(self._commit_deferred)
        future = self.journal_waits.watch(written)
        future.add_done_callback(lambda done: self._journaled(done, then))
        return future

    def _commit_deferred(self) -> None:
        self._commit_due = False
        try:
            self.store.commit_deferred()
        except JournalError:
            pass  # the writer failed its futures already: _journaled stops the broker

    def _journaled(self, future: asyncio.Future[int], then: Callable[[bool], None]) -> None:
        error = None if future.cancelled() else future.exception()
        if error is not None:
            self.fail(f"{type(error).__name__}: {error}")
        then(not future.cancelled() and error is None)

    def _require_running(self) -> None:
        if self.failure is not None:
            raise BrokerFailed(self.failure)

    def fail(self, reason: str) -> None:
        """The journal failed: abort every connection at once, stop listening, tell the owner."""
        if self.failure is not None:
            return
        log.critical("%s: %s", codes.title(codes.JOURNAL_FAILED), reason)
        # The cause goes to clients too: "share full" and "fenced" call for different actions.
        self.halt(
            reason,
            codes.JOURNAL_FAILED,
            f"the journal failed ({reason}); reconnect to the new master",
        )
        if self.on_fatal is not None:
            try:
                self.on_fatal(reason)
            except Exception:  # the owner's bug must not keep connections open
                log.exception("the broker's on_fatal callback failed")

    def halt(self, reason: str, code: str, detail: str) -> None:
        """Accept nothing more: stop listening, abort every connection with ``code``."""
        if self.failure is None:
            self.failure = reason
        if self.on_stop_listening is not None:
            self.on_stop_listening()
        self.abort_all(code, detail)

    def abort_all(self, code: str, detail: str) -> None:
        for peer in list(self.peers):
            peer.abort(code, detail)


def _owner_writable(subscription: Subscription) -> bool:
    owner: Peer = subscription.owner  # type: ignore[assignment]
    return owner.writable
