"""One client connection: STOMP frames in, replies out in order, each only once it is durable.

The frames' effects go to the broker (``core.py``); their replies go through
the connection's ``ReplyQueue`` (``replies.py``), which holds a RECEIPT until
every journal write before it completed. Here: the asyncio protocol, one
handler per client command, transactions, flow control and heart-beats.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import cast

from primacy.broker import codes
from primacy.broker.ack_ids import LegacyAckIds
from primacy.broker.authentication import Login, PendingLogin, authorize
from primacy.broker.backlog import Full
from primacy.broker.core import Broker, BrokerFailed, check_destination
from primacy.broker.flow_control import IF_FULL_HEADER, HeldFrames, check_room
from primacy.broker.frame_rules import (
    error_frame,
    heart_beat,
    negotiate_version,
    negotiated,
    positive_int,
    required,
)
from primacy.broker.frames import (
    CONTROL_CHARACTERS,
    VERSIONS,
    Frame,
    FrameParser,
    StompProtocolError,
    encode,
)
from primacy.broker.heartbeats import ConnectionTimers
from primacy.broker.queues import AckMode, QueuedMessage, Subscription
from primacy.broker.refusals import Refused
from primacy.broker.replies import ReplyQueue, Writes
from primacy.broker.transactions import Transactions
from primacy.broker.users import User

log = logging.getLogger("primacy.broker")

# Transport headers: meaningful for one frame, never stored with the message.
_NOT_STORED = frozenset(
    {"destination", "message-id", "receipt", "transaction", "content-length", IF_FULL_HEADER}
)
_SET_BY_BROKER = frozenset({"subscription", "message-id", "destination", "ack", "redelivered"})
# After an ERROR the socket is closed once the frame is flushed; a client that
# does not read is cut off after this long.
_CLOSE_GRACE_S = 5.0
_sessions = itertools.count(1)


class StompConnection(asyncio.Protocol):
    """The protocol object asyncio creates for each accepted socket."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.loop = broker.loop
        self.session = str(next(_sessions))
        self.parser = FrameParser(self.config.frame_limits)
        self.transport: asyncio.Transport | None = None
        self.connected = False
        self.closing = False  # an ERROR or DISCONNECT is queued: later frames are ignored
        self.version = "1.2"  # until CONNECT says otherwise
        self.subscriptions: dict[str, Subscription] = {}
        self._legacy_ack_ids = LegacyAckIds()  # STOMP 1.0/1.1 acknowledge by message id
        self.transactions = Transactions(
            self.config.max_transactions_per_connection,
            self.config.max_transaction_bytes,
            broker.counters,
        )
        self._socket_writable = True
        self._replies = ReplyQueue(self._send_frame, self._close_after_reply)
        self._writes_in_flight = 0
        self._reading_paused = False
        # Frames held behind a SEND that waits for room (flow_control.py), oldest first.
        self._early: list[bytes] | None = None  # see _secure
        self._held = HeldFrames(
            self, broker.backlog, broker.counters, self.config.flow_control_timeout_s
        )
        self.user: User | None = None  # who logged in, when there is a users file
        self._login: Login | None = None
        self._timers = ConnectionTimers(
            self.loop,
            self.config.heart_beat_grace_factor,
            self._write,
            lambda: self._reading_paused,
            self._silent_too_long,
        )

    # ---- asyncio callbacks -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if len(self.broker.peers) >= self.config.max_connections:
            self.broker.counters.connections_refused += 1
            self.closing = True
            detail = f"this broker serves at most {self.config.max_connections} connections"
            log.warning("%s: %s", codes.title(codes.CONNECTION_LIMIT), detail)
            self._write(encode(error_frame(codes.CONNECTION_LIMIT, detail, None), self.version))
            self.transport.close()
            return
        self.transport.set_write_buffer_limits(high=self.config.write_buffer_high_bytes)
        if self.broker.authenticator is not None:
            peer = self.transport.get_extra_info("peername")
            source = str(peer[0]) if isinstance(peer, tuple) else "local"
            self._login = Login(
                self.broker.authenticator, self.broker.logins, self.loop, source, self._held.release
            )
        self.broker.add_peer(self)
        self._timers.later("connect", self.config.connect_timeout_s, self._connect_deadline)
        if self.broker.tls is not None:
            self._early = []  # what arrives before start_tls returns
            self.loop.create_task(self._secure(self.transport))

    async def _secure(self, plain: asyncio.Transport) -> None:
        """The TLS handshake; within the CONNECT deadline, or the connection is dropped."""
        assert self.broker.tls is not None
        try:
            secured = await self.loop.start_tls(
                plain,
                self,
                self.broker.tls.context,
                server_side=True,
                ssl_handshake_timeout=self.config.connect_timeout_s,
            )
        except (TimeoutError, OSError) as error:  # ssl.SSLError is an OSError
            self.broker.counters.tls_handshakes_failed += 1
            log.warning(
                "%s: session %s: %s",
                codes.title(codes.TLS_HANDSHAKE_FAILED),
                self.session,
                str(error)[:300] or type(error).__name__,
            )
            plain.abort()
            self.connection_lost(error)  # the TLS layer never told this protocol it was made
            return
        if secured is None or self.transport is None:
            return  # closed while shaking hands
        self.transport = secured
        secured.set_write_buffer_limits(high=self.config.write_buffer_high_bytes)
        # The TLS layer may hand over the client's first bytes before start_tls returns;
        # they were kept until the connection writes (and pauses) through the TLS transport.
        early, self._early = self._early, None
        if early:
            self.data_received(b"".join(early))

    def data_received(self, data: bytes) -> None:
        if self._early is not None:
            self._early.append(data)
            return
        self._timers.received()
        if self.closing:
            return
        try:
            frames = self.parser.feed(data)
        except StompProtocolError as error:
            self.refuse(error.code, str(error), None)
            return
        for frame in frames:
            if self.closing:
                break
            if self._held:
                self._held.append(frame)  # behind the waiting SEND, in order
            else:
                self.handle(frame)

    def eof_received(self) -> bool:
        return False  # the client closed its side: close ours

    def connection_lost(self, exc: Exception | None) -> None:
        self._timers.stop()
        self.closing = True
        self._held.clear()
        if self._login is not None:
            self._login.cancel()
        self.broker.remove_peer(self, list(self.subscriptions.values()))
        self.subscriptions.clear()
        self.transactions.clear()
        self._replies.clear()
        self.transport = None

    def pause_writing(self) -> None:
        self._socket_writable = False

    def resume_writing(self) -> None:
        self._socket_writable = True
        self.broker.peer_writable()

    # ---- what the broker calls -------------------------------------------------

    @property
    def writable(self) -> bool:
        return self._socket_writable and not self.closing and self.transport is not None

    def deliver(self, subscription: Subscription, message: QueuedMessage, ack_id: str) -> None:
        body = message.body or b""
        headers = [
            ("subscription", subscription.subscription_id),
            ("message-id", message.message_id),
            ("destination", message.destination),
        ]
        if subscription.ack_mode is not AckMode.AUTO:
            headers.append(("ack", ack_id))
            if self.version != "1.2":
                self._legacy_ack_ids.remember(
                    subscription.subscription_id, message.message_id, ack_id
                )
        if message.redelivered:
            headers.append(("redelivered", "true"))
        headers.append(("content-length", str(len(body))))
        headers += [h for h in message.headers if h[0] not in _SET_BY_BROKER]
        # A message journaled before control characters were refused still gets delivered.
        clean = tuple((_printable(k), _printable(v)) for k, v in headers)
        self._write(encode(Frame("MESSAGE", clean, body), self.version))

    def abort(self, code: str, detail: str) -> None:
        """Close at once: one best-effort ERROR, then drop whatever is still buffered."""
        if self.transport is None:
            return
        self.closing = True
        self._write(encode(error_frame(code, detail, None), self.version))
        self.transport.abort()

    # ---- frames ------------------------------------------------------------------

    def handle(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        handler = _HANDLERS.get(frame.command)
        try:
            if handler is None or (frame.command == "NACK" and self.version == "1.0"):
                raise Refused(
                    codes.UNKNOWN_COMMAND, f"{frame.command[:64]!r} is not a STOMP client command"
                )
            if not self.connected and frame.command not in ("CONNECT", "STOMP"):
                raise Refused(codes.NOT_CONNECTED, "send CONNECT (or STOMP) first")
            writes = handler(self, frame)
        except Refused as refusal:
            self.refuse(refusal.code, str(refusal), receipt)
            return
        except BrokerFailed:
            return  # the broker aborted every connection, this one included
        except Full as full:
            self._held.wait_for_room(frame, full)
            return
        except PendingLogin:
            self._held.hold(frame)  # handled again, with what follows, once checked
            return
        if frame.command == "DISCONNECT":
            reply = Frame.make("RECEIPT", {"receipt-id": receipt}) if receipt else None
            self.closing = True
            self._replies.after(writes, reply, then_close=True)
        elif receipt is not None:
            self._replies.after(writes, Frame.make("RECEIPT", {"receipt-id": receipt}))
        elif writes:
            self._replies.after(writes, None)

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
        destination = check_destination(frame.get("destination"))
        if self.user is not None:
            authorize(self.user, "send to", destination, self.broker.counters)
        message_id = frame.get("message-id") or self.broker.new_message_id(self.session)
        headers: dict[str, str] = {}
        for key, value in frame.headers:
            if key not in _NOT_STORED:
                headers.setdefault(key, value)
        self.broker.check_size(destination, message_id, headers, frame.body)
        check_room(self.broker.backlog, self.broker.counters, destination, frame)

        def send() -> Writes:
            return [self._track(self.broker.send(destination, message_id, headers, frame.body))]

        return self.transactions.now_or_on_commit(frame, send)

    def _on_subscribe(self, frame: Frame) -> Writes:
        destination = check_destination(frame.get("destination"))
        if self.user is not None:
            authorize(self.user, "receive from", destination, self.broker.counters)
        subscription_id = required(frame, "id")
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
        subscription = Subscription(self, subscription_id, destination, ack_mode, prefetch)
        self.subscriptions[subscription_id] = subscription
        self.broker.subscribe(subscription)
        return []

    def _on_unsubscribe(self, frame: Frame) -> Writes:
        subscription_id = required(frame, "id")
        subscription = self.subscriptions.pop(subscription_id, None)
        if subscription is None:
            raise Refused(codes.BAD_REQUEST, f"no subscription with id {subscription_id!r}")
        self.broker.unsubscribe(subscription)
        self._legacy_ack_ids.forget_subscription(subscription_id)
        return []

    def _on_ack(self, frame: Frame) -> Writes:
        ack_id = self._ack_id(frame)

        def ack() -> Writes:
            settled: list[QueuedMessage] = []
            for subscription in self.subscriptions.values():
                done = self.broker.book.acknowledge(subscription, ack_id)
                for message in done:
                    self._legacy_ack_ids.forget(subscription.subscription_id, message.message_id)
                settled += done
            return [self._track(f) for f in self.broker.settle(settled)]

        return self.transactions.now_or_on_commit(frame, ack)

    def _on_nack(self, frame: Frame) -> Writes:
        ack_id = self._ack_id(frame)

        def nack() -> Writes:
            for subscription in self.subscriptions.values():
                rejected = self.broker.book.reject(subscription, ack_id)
                for message in rejected:
                    self._legacy_ack_ids.forget(subscription.subscription_id, message.message_id)
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
        return self.transactions.commit(frame)

    def _on_abort(self, frame: Frame) -> Writes:
        self.transactions.abort(frame)
        return []

    def _on_disconnect(self, frame: Frame) -> Writes:
        return []

    # ---- flow control, replies, timers ----------------------------------------------

    def _track(self, write: asyncio.Future[int]) -> asyncio.Future[int]:
        """Count a journal write; stop reading while too many are in flight."""
        self._writes_in_flight += 1
        if self._writes_in_flight >= self.config.max_writes_in_flight_per_connection:
            self.pause_reading()
        write.add_done_callback(self._write_done)
        return write

    def _write_done(self, _: asyncio.Future[int]) -> None:
        self._writes_in_flight -= 1
        self.resume_reading_if_due()

    def pause_reading(self) -> None:
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def resume_reading_if_due(self) -> None:
        """Read again once neither a waiting SEND nor too many journal writes hold it back."""
        low = self.config.max_writes_in_flight_per_connection // 2
        if (
            self._reading_paused
            and not self.closing
            and not self._held
            and self._writes_in_flight <= low
            and self.transport is not None
        ):
            self._reading_paused = False
            self._timers.received()  # silence while paused was ours
            self.transport.resume_reading()

    def _send_frame(self, frame: Frame) -> None:
        self._write(encode(frame, self.version))

    def _close_after_reply(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.loop.call_later(_CLOSE_GRACE_S, self._abort_transport)

    def refuse(self, code: str, detail: str, receipt: str | None) -> None:
        """Send ERROR after the replies already queued, then close (STOMP: ERROR ends it)."""
        log.warning("%s: session %s: %s", codes.title(code), self.session, detail)
        self.broker.counters.errors_sent += 1
        self.closing = True
        self.pause_reading()
        self._replies.after([], error_frame(code, detail, receipt), then_close=True)

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)
            self._timers.sent()

    def _abort_transport(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _connect_deadline(self) -> None:
        if not self.connected and not self.closing:
            detail = f"no CONNECT frame within {self.config.connect_timeout_s} s"
            self.refuse(codes.CONNECT_TIMEOUT, detail, None)

    def _silent_too_long(self, detail: str) -> None:
        log.warning(
            "%s: session %s: %s", codes.title(codes.HEARTBEAT_TIMEOUT), self.session, detail
        )
        self.broker.counters.errors_sent += 1
        self.abort(codes.HEARTBEAT_TIMEOUT, detail)


_HANDLERS: dict[str, Callable[[StompConnection, Frame], Writes]] = {
    "CONNECT": StompConnection._on_connect,
    "STOMP": StompConnection._on_connect,
    "SEND": StompConnection._on_send,
    "SUBSCRIBE": StompConnection._on_subscribe,
    "UNSUBSCRIBE": StompConnection._on_unsubscribe,
    "ACK": StompConnection._on_ack,
    "NACK": StompConnection._on_nack,
    "BEGIN": StompConnection._on_begin,
    "COMMIT": StompConnection._on_commit,
    "ABORT": StompConnection._on_abort,
    "DISCONNECT": StompConnection._on_disconnect,
}


def _printable(text: str) -> str:
    return CONTROL_CHARACTERS.sub("\ufffd", text)
