"""What each STOMP client command does: the frame's checks, then its effect on the broker.

A trait of ``StompConnection`` (``connection.py``), which owns the socket, the
reply order, flow control and timers; here is only the meaning of the frames.
A handler raises ``Refused`` for a frame the broker will not take, and returns
the journal writes its reply must wait for. Compiled by mypyc (pyproject.toml), which
lets a class have one base with a layout of its own (the connection's is asyncio's
``BufferedProtocol``) and any number of traits beside it.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections import Counter

from mypy_extensions import trait

from primacy.broker import codes
from primacy.broker.ack_ids import LegacyAckIds
from primacy.broker.authentication import Login, PendingLogin, authorize
from primacy.broker.backlog import Full
from primacy.broker.config import BrokerConfig
from primacy.broker.core import Broker
from primacy.broker.dead_letter import dead_letter_copy_headers, dead_letter_queue, dead_letterable
from primacy.broker.expiry import EXPIRES_HEADER, expired_on_arrival, is_persistent, parse_expires
from primacy.broker.flow_control import IF_FULL_HEADER, HeldFrames, check_room
from primacy.broker.frame_rules import (
    check_destination,
    heart_beat,
    negotiate_version,
    negotiated,
    positive_int,
    required,
)
from primacy.broker.frames import VERSIONS, Frame, FrameParser
from primacy.broker.heartbeats import ConnectionTimers
from primacy.broker.message_fates import BrokerFailed
from primacy.broker.message_ids import CLIENT_ID_HEADER, journal_id
from primacy.broker.queues import AckMode, QueuedMessage, Subscription
from primacy.broker.refusals import Refused
from primacy.broker.replies import ReplyQueue, Writes
from primacy.broker.state_limits import (
    StateAccount,
    check_header_values,
    subscription_bytes,
    utf8_len,
)
from primacy.broker.temp_queues import (
    REPLY_TO_HEADER,
    TEMP_PREFIX,
    ConnectionTempQueues,
    is_temporary,
)
from primacy.broker.topics import CLIENT_ID_HEADER as TOPIC_CLIENT_ID
from primacy.broker.topics import durable_queue_for, is_topic, subscription_name
from primacy.broker.transactions import SendKey, Transactions
from primacy.broker.users import User

# Transport headers: meaningful for one frame, never stored with the message.
_NOT_STORED = frozenset(
    {"destination", "message-id", "receipt", "transaction", "content-length", IF_FULL_HEADER}
)
# The client commands of STOMP 1.2 (NACK is refused from a 1.0 client).
_COMMANDS = frozenset(
    {
        "CONNECT",
        "STOMP",
        "SEND",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "ACK",
        "NACK",
        "BEGIN",
        "COMMIT",
        "ABORT",
        "DISCONNECT",
    }
)


@trait
class StompCommands:
    """The client commands of one connection; the state they use is the connection's, which
    sets every attribute below in its ``__init__``."""

    broker: Broker
    config: BrokerConfig
    session: str
    version: str
    parser: FrameParser
    connected: bool
    closing: bool
    user: User | None
    client_id: str | None  # CONNECT's client-id: names durable topic subscriptions
    subscriptions: dict[str, Subscription]
    transactions: Transactions
    state: StateAccount  # what its subscriptions and transactions hold (state_limits.py)
    temp_queues: ConnectionTempQueues  # its /temp-queue/NAME queues (temp_queues.py)
    _legacy_ack_ids: LegacyAckIds
    _login: Login | None
    _held: HeldFrames
    _replies: ReplyQueue
    _timers: ConnectionTimers

    # ---- the connection's own (connection.py) -----------------------------------

    @abstractmethod
    def refuse(self, code: str, detail: str, receipt: str | None) -> None:
        """Send ERROR after the replies already queued, then close."""

    @abstractmethod
    def _track(self, write: asyncio.Future[int]) -> asyncio.Future[int]:
        """Count a journal write against the connection's flow control; ``write`` itself."""

    # ---- frames ----------------------------------------------------------------

    def handle(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        if receipt is not None and utf8_len(receipt) > self.config.max_header_value_bytes:
            receipt = None  # refused below, and not echoed
        try:
            check_header_values(
                frame, self.config.max_header_value_bytes, self.config.max_destination_name_bytes
            )
            if frame.command not in _COMMANDS or (
                frame.command == "NACK" and self.version == "1.0"
            ):
                raise Refused(
                    codes.UNKNOWN_COMMAND, f"{frame.command[:64]!r} is not a STOMP client command"
                )
            if not self.connected and frame.command not in ("CONNECT", "STOMP"):
                raise Refused(codes.NOT_CONNECTED, "send CONNECT (or STOMP) first")
            writes = self._perform(frame)
        except Refused as refusal:
            self.refuse(refusal.code, str(refusal), receipt)
            return
        except BrokerFailed:
            return  # the broker aborted every connection, this one included
        except Full as full:
            self._held.wait_for_room(frame, full)
            return
        except PendingLogin:
            # Handled again, with what follows, once checked. Reading goes on until more
            # arrives, so a client that hangs up is seen at once and its login slot freed.
            self._held.hold(frame, pause_reading=False)
            return
        if frame.command == "DISCONNECT":
            reply = Frame.make("RECEIPT", {"receipt-id": receipt}) if receipt else None
            self.closing = True
            self._replies.after(writes, reply, then_close=True)
        elif receipt is not None:
            self._replies.after(writes, Frame("RECEIPT", (("receipt-id", receipt),)))
        elif writes:
            self._replies.after(writes, None)

    def _perform(self, frame: Frame) -> Writes:
        """What the frame's command does (one of ``_COMMANDS``); the most frequent first."""
        match frame.command:
            case "SEND":
                return self._on_send(frame)
            case "ACK":
                return self._on_ack(frame)
            case "NACK":
                return self._on_nack(frame)
            case "BEGIN":
                return self._on_begin(frame)
            case "COMMIT":
                return self._on_commit(frame)
            case "ABORT":
                return self._on_abort(frame)
            case "SUBSCRIBE":
                return self._on_subscribe(frame)
            case "UNSUBSCRIBE":
                return self._on_unsubscribe(frame)
            case "CONNECT" | "STOMP":
                return self._on_connect(frame)
            case _:  # DISCONNECT: its RECEIPT and the close are handle's
                return []

    def _on_connect(self, frame: Frame) -> Writes:
        if self.connected:
            raise Refused(codes.BAD_REQUEST, "already connected")
        version = negotiate_version(frame.get("accept-version"))
        if version is None:
            raise Refused(
                codes.UNSUPPORTED_VERSION,
                f"this server speaks STOMP {', '.join(VERSIONS)}; the client accepts "
                f"{frame.get('accept-version')}",
            )
        self.version = self.parser.version = version
        self.client_id = frame.get(TOPIC_CLIENT_ID)
        if self._login is not None:
            self.user = self._login.user(frame, self.broker.counters, self.session)
        # Heart-beats exist from STOMP 1.1 on; a 1.0 client's header means nothing.
        beats = frame.get("heart-beat") if version != "1.0" else None
        client_send_ms, client_receive_ms = heart_beat(beats or "0,0")
        self.connected = True
        self._timers.cancel("connect")
        self._timers.start_heart_beats(
            negotiated(self.config.heart_beat_send_ms, client_receive_ms),
            negotiated(self.config.heart_beat_receive_ms, client_send_ms),
        )
        connected = {
            "version": version,
            "heart-beat": f"{self.config.heart_beat_send_ms},{self.config.heart_beat_receive_ms}",
            "server": self.config.server_name,
            "session": self.session,
        }
        self._replies.after([], Frame.make("CONNECTED", connected))
        return []

    def _on_send(self, frame: Frame) -> Writes:
        destination = self.temp_queues.resolve(check_destination(frame.get("destination")))
        # Temporary queues are outside the users file's patterns: anyone logged in may reply.
        if self.user is not None and not is_temporary(destination):
            authorize(self.user, "send to", destination, self.broker.counters)
        headers: dict[str, str] = {}
        for key, value in frame.headers:
            if key not in _NOT_STORED:
                headers.setdefault(key, value)
        reply_to = headers.get(REPLY_TO_HEADER)
        if reply_to is not None and reply_to.startswith(TEMP_PREFIX):
            # The replier sends to the full name (made now, so a reply never finds it gone).
            headers[REPLY_TO_HEADER] = self.temp_queues.resolve(check_destination(reply_to))
        if is_temporary(destination) and not self.broker.temp_queues.is_live(destination):
            return self.transactions.now_or_on_commit(frame, self._drop_for_gone_temp_queue)
        expires = frame.get(EXPIRES_HEADER)
        expired = expires is not None and expired_on_arrival(parse_expires(expires))
        if expired:
            if not is_persistent(frame.headers) or not dead_letterable(destination):
                return self.transactions.now_or_on_commit(frame, self._drop_expired)
            # Persistent: stored in its dead-letter queue instead, as ActiveMQ does.
            headers = dead_letter_copy_headers(headers, destination)
            destination = dead_letter_queue(destination)
        client_id = frame.get("message-id")
        if client_id is None:
            message_id = self.broker.new_message_id()
        else:
            # Scoped by login, so no other sender can send this id first (message_ids.py).
            message_id = journal_id(self.user.name if self.user else None, client_id)
            if message_id != client_id:
                headers[CLIENT_ID_HEADER] = client_id  # what consumers are shown
        record = self.broker.encode_send(destination, message_id, headers, frame.body)
        # A resend needs no room: it is receipted, not stored again.
        check_room(
            self.broker.backlog,
            self.broker.counters,
            destination,
            frame,
            lambda: (
                client_id is not None and self.broker.store.is_duplicate(destination, message_id)
            ),
        )
        # A SEND held for its COMMIT is encoded again then: a record is stamped when submitted.
        ready = record if frame.get("transaction") is None else None
        new_id = client_id is None

        def send() -> Writes:
            if expired:
                self.broker.counters.messages_expired += 1
            sent = self.broker.send(
                destination, message_id, headers, frame.body, ready, new_id=new_id
            )
            return [self._track(sent)]

        return self.transactions.now_or_on_commit(frame, send, sends=(destination, message_id))

    def _drop_for_gone_temp_queue(self) -> Writes:
        """A SEND to a temporary queue whose connection is gone: receipted, never stored."""
        self.broker.temp_queues.sends_dropped += 1
        return []

    def _drop_expired(self) -> Writes:
        """A SEND past its ``expires`` already, not persistent: receipted, never stored."""
        self.broker.counters.messages_expired += 1
        return []

    def _on_subscribe(self, frame: Frame) -> Writes:
        destination = self.temp_queues.resolve(check_destination(frame.get("destination")))
        self.temp_queues.check_subscribe(destination)
        if self.user is not None and not is_temporary(destination):
            authorize(self.user, "receive from", destination, self.broker.counters)
        subscription_id = frame.get("id")
        implicit_id = subscription_id is None and self.version == "1.0"
        if subscription_id is None:
            # STOMP 1.0 needs only the destination, which then names the subscription
            # (for UNSUBSCRIBE and a 1.0 ACK); 1.1 and 1.2 require the id.
            subscription_id = destination if implicit_id else required(frame, "id")
        if subscription_id in self.subscriptions:
            raise Refused(codes.BAD_REQUEST, f"subscription id {subscription_id!r} is in use")
        if len(self.subscriptions) >= self.config.max_subscriptions_per_connection:
            self.broker.counters.subscriptions_refused += 1
            raise Refused(
                codes.SUBSCRIPTION_LIMIT,
                f"a connection may hold at most {self.config.max_subscriptions_per_connection} "
                "subscriptions",
            )
        try:
            ack_mode = AckMode(frame.get("ack") or "auto")
        except ValueError:
            raise Refused(
                codes.BAD_REQUEST, "ack must be auto, client or client-individual"
            ) from None
        prefetch = positive_int(frame.get("activemq.prefetchSize"), self.config.prefetch)
        try:
            what = f"the SUBSCRIBE to {destination[:64]!r}"
            self.state.charge(subscription_bytes(destination, subscription_id), what)
        except Refused:
            self.broker.counters.subscriptions_refused += 1
            raise
        subscription = Subscription(
            self, subscription_id, destination, ack_mode, prefetch, implicit_id=implicit_id
        )
        writes: Writes = []
        if is_topic(destination):  # its own queue, journaled if durable (topics.py)
            try:
                name = subscription_name(frame.headers)
                started = self.broker.topics.attach(self.broker, subscription, self.client_id, name)
            except Refused:
                self.state.refund(subscription_bytes(destination, subscription_id))
                raise
            writes = [self._track(write) for write in started]
        self.subscriptions[subscription_id] = subscription
        self.broker.subscribe(subscription)
        return writes

    def _on_unsubscribe(self, frame: Frame) -> Writes:
        durable = subscription_name(frame.headers)
        if durable is not None:
            return self._end_durable(frame, durable)
        subscription_id = frame.get("id")
        destination = frame.get("destination")
        if destination is not None:
            destination = self.temp_queues.full_name(destination)
        if subscription_id is None and destination is not None and self.version == "1.0":
            # STOMP 1.0 names the subscription by id or by destination: every subscription
            # of this connection to that destination (a queue, or a topic) ends.
            ids = [
                s.subscription_id
                for s in self.subscriptions.values()
                if (s.topic or s.destination) == destination
            ]
            if not ids:
                raise Refused(codes.BAD_REQUEST, f"no subscription to {destination[:100]!r}")
        else:
            ids = [required(frame, "id")]
            if ids[0] not in self.subscriptions:
                raise Refused(codes.BAD_REQUEST, f"no subscription with id {ids[0]!r}")
        for ended in ids:
            subscription = self.subscriptions.pop(ended)
            self.broker.unsubscribe(subscription)
            self._legacy_ack_ids.forget_subscription(ended)
            charged = subscription.topic or subscription.destination
            self.state.refund(subscription_bytes(charged, ended))
        return []

    def _end_durable(self, frame: Frame, name: str) -> Writes:
        """UNSUBSCRIBE naming a durable subscription (ActiveMQ's way): ends its subscriber
        here (``id``, if given and held) and the subscription itself, with what it kept."""
        queue = durable_queue_for(self.client_id, name, "UNSUBSCRIBE")
        subscription_id = frame.get("id")
        if subscription_id is not None and subscription_id in self.subscriptions:
            self._on_unsubscribe(Frame("UNSUBSCRIBE", (("id", subscription_id),)))
        topics = self.broker.topics
        if queue in topics.attached:
            raise Refused(
                codes.DURABLE_IN_USE,
                f"durable subscription {name[:100]!r} has a subscriber on another connection",
            )
        if queue not in topics.topic_of:
            return []  # nothing to end: ended already, or never begun
        return [self._track(topics.end(self.broker, queue))]

    def _on_ack(self, frame: Frame) -> Writes:
        ack_id = self._ack_id(frame)

        def ack() -> Writes:
            settled: list[QueuedMessage] = []
            for subscription in self.subscriptions.values():
                done = self.broker.book.acknowledge(subscription, ack_id)
                for message in done:
                    self._legacy_ack_ids.forget(subscription.subscription_id, message.shown_id)
                settled += done
            return [self._track(f) for f in self.broker.settle(settled)]

        return self.transactions.now_or_on_commit(frame, ack)

    def _on_nack(self, frame: Frame) -> Writes:
        ack_id = self._ack_id(frame)

        def nack() -> Writes:
            for subscription in self.subscriptions.values():
                rejected = self.broker.book.reject(subscription, ack_id)
                for message in rejected:
                    self._legacy_ack_ids.forget(subscription.subscription_id, message.shown_id)
                self.broker.requeue(rejected)
            return []

        return self.transactions.now_or_on_commit(frame, nack)

    def _ack_id(self, frame: Frame) -> str:
        """Which delivery an ACK or NACK names: STOMP 1.2 by the MESSAGE's ``ack`` header."""
        if self.version == "1.2":
            return required(frame, "id")
        return self._legacy_ack_ids.named_by(frame)

    def _on_begin(self, frame: Frame) -> Writes:
        self.transactions.begin(frame)
        return []

    def _on_commit(self, frame: Frame) -> Writes:
        return self.transactions.commit(frame, self._check_commit_room)

    def _check_commit_room(self, sends: list[SendKey]) -> None:
        """A COMMIT stores all of its messages or none: refused if they do not all fit.

        Resends (a client's whole transaction again after a failover) need no room. Not
        held for room as a lone SEND is: a transaction may never fit, and holding its
        COMMIT would hold every frame behind it (flow_control.py).
        """
        is_duplicate = self.broker.store.is_duplicate
        new = Counter(key[0] for key in set(sends) if not is_duplicate(*key))
        reason = self.broker.backlog.full_for(new)
        if reason is not None:
            self.broker.counters.sends_refused_full += 1
            raise Refused(
                codes.TRANSACTION_FULL,
                f"{reason}; the transaction is dropped, nothing of it was stored",
            )

    def _on_abort(self, frame: Frame) -> Writes:
        self.transactions.abort(frame)
        return []
