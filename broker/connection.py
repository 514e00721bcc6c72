"""One client connection: STOMP frames in, replies out in order, each only once it is durable.

The frames' effects go to the broker (``core.py``); their replies go through
the connection's ``ReplyQueue`` (``replies.py``), which holds a RECEIPT until
every journal write before it completed. Here: the asyncio protocol, TLS,
flow control, writes and heart-beats; what each client command means is in
``commands.py``. A connection is admitted by the listener's budgets (``Admission``,
over ``admission.py``): per network and in all; until its CONNECT arrives it is
*unauthenticated*, and may be displaced by a newer connection of its network. What its
subscriptions and transactions hold is charged to the listener's byte budget
(``state_limits.py``). Replies are flow-controlled as deliveries are: while the socket's
buffer is above ``write_buffer_high_bytes`` the connection is not read from, so a client that
reads nothing cannot make the master buffer replies without end (issue 42, finding 3).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass
from typing import cast

from primacy.broker import codes
from primacy.broker.ack_ids import LegacyAckIds
from primacy.broker.admission import LOCAL, Budget, ByteBudget, Networks
from primacy.broker.authentication import MAX_LOGINS_IN_PROGRESS, MAX_LOGINS_PER_NETWORK, Login
from primacy.broker.commands import StompCommands
from primacy.broker.config import BrokerConfig
from primacy.broker.core import Broker
from primacy.broker.event_loop import PlainBytes, shutdown_socket, start_tls
from primacy.broker.flow_control import HeldFrames
from primacy.broker.frame_rules import error_frame
from primacy.broker.frames import CONTROL_CHARACTERS, Frame, FrameParser, StompProtocolError, encode
from primacy.broker.heartbeats import ConnectionTimers
from primacy.broker.queues import AckMode, QueuedMessage, Subscription
from primacy.broker.replies import ReplyQueue
from primacy.broker.state_limits import StateAccount
from primacy.broker.temp_queues import REMOTE_PREFIX, ConnectionTempQueues
from primacy.broker.transactions import Transactions
from primacy.broker.users import User

log = logging.getLogger("primacy.broker")

_SET_BY_BROKER = frozenset({"subscription", "message-id", "destination", "ack", "redelivered"})
# After an ERROR the socket is closed once the frame is flushed; a client that
# does not read is cut off after this long.
_CLOSE_GRACE_S = 5.0
_sessions = itertools.count(1)


@dataclass(frozen=True)
class Admission:
    """The STOMP listener's budgets, one set per serving broker: connections (``max_connections``,
    ``max_connections_per_network``), those without CONNECT yet (half of ``max_connections``,
    ``max_unauthenticated_per_network``), logins in progress (authentication.py), and the bytes
    subscriptions and transactions hold (``max_state_bytes``, ``max_state_bytes_per_network``)."""

    connections: Budget[StompConnection]
    unauthenticated: Budget[StompConnection]
    logins: Budget[Login]
    state: ByteBudget

    @classmethod
    def of(cls, config: BrokerConfig) -> Admission:
        networks = Networks(config.network_prefix_ipv4, config.network_prefix_ipv6)
        return cls(
            Budget(config.max_connections, config.connections_per_network, networks),
            Budget(
                max(1, config.max_connections // 2), config.unauthenticated_per_network, networks
            ),
            Budget(MAX_LOGINS_IN_PROGRESS, MAX_LOGINS_PER_NETWORK, networks),
            ByteBudget(config.max_state_bytes, config.state_bytes_per_network, networks),
        )


class StompConnection(asyncio.BufferedProtocol, StompCommands):
    """The protocol object asyncio creates for each accepted socket; its client commands are
    ``StompCommands``'s (``commands.py``, a trait: asyncio's protocol is the one base class
    mypyc allows). Compiled, it is a native class: attributes not set in ``__init__`` (or
    declared in the class) cannot be set, and its methods cannot be replaced at run time."""

    # False when the layer below does the TLS handshake itself (websocket.py: TLS, then HTTP).
    handshakes_tls = True

    def __init__(self, broker: Broker, admission: Admission) -> None:
        self.broker = broker
        self.admission = admission
        self.source = LOCAL  # the client's address, once connected
        self.config = broker.config
        self.loop = broker.loop
        self.session = str(next(_sessions))
        self.parser = FrameParser(self.config.frame_limits)
        self.transport: asyncio.Transport | None = None
        self.connected = False
        self.closing = False  # an ERROR or DISCONNECT is queued: later frames are ignored
        self.version = "1.2"  # until CONNECT says otherwise
        self.client_id: str | None = None  # CONNECT's client-id (durable topic subscriptions)
        self.subscriptions: dict[str, Subscription] = {}
        self._legacy_ack_ids = LegacyAckIds()  # STOMP 1.0/1.1 acknowledge by message id
        self.state = StateAccount(admission.state, self.config.max_state_bytes_per_connection)
        self.temp_queues = ConnectionTempQueues(
            broker.temp_queues,
            self,
            f"{REMOTE_PREFIX}{broker.store.epoch}.{self.session}.",
            self.config.max_temp_queues_per_connection,
            self.state,
        )
        self.transactions = Transactions(
            self.config.max_transactions_per_connection,
            self.config.max_transaction_bytes,
            broker.counters,
            self.state,
        )
        self._socket_writable = True
        self._replies = ReplyQueue(self._send_frame, self._close_after_reply)
        self._writes_in_flight = 0
        self._reading_paused = False
        # Frames held behind a SEND that waits for room (flow_control.py), oldest first.
        self._early: list[bytes] | None = None  # see _secure
        self._plain: PlainBytes | None = None  # bytes read before the TLS layer, see _secure
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
        peer = self.transport.get_extra_info("peername")
        self.source = str(peer[0]) if isinstance(peer, tuple) else LOCAL
        self.state.network = self.admission.state.networks.of(self.source)
        refusal = self._admit()
        if refusal is not None:
            code, detail = refusal
            self.broker.counters.connections_refused += 1
            self.closing = True
            log.warning("%s: %s", codes.title(code), detail)
            self._write(encode(error_frame(code, detail, None), self.version))
            self.transport.close()
            return
        self.transport.set_write_buffer_limits(high=self.config.write_buffer_high_bytes)
        if self.broker.authenticator is not None:
            self._login = Login(
                self.broker.authenticator,
                self.broker.logins,
                self.admission.logins,
                self.loop,
                self.source,
                self._held.release,
            )
        self.broker.add_peer(self)
        self._timers.later("connect", self.config.connect_timeout_s, self._connect_deadline)
        if self.broker.tls is not None and self.handshakes_tls:
            self._early = []  # what arrives before start_tls returns
            self._plain = PlainBytes()  # what arrives before start_tls begins
            self.loop.create_task(self._secure(self.transport))

    def _admit(self) -> tuple[str, str] | None:
        """Take this connection's room in the listener's budgets; the refusal if there is none.
        Connections without CONNECT that it displaces are closed, told why."""
        connections, unauthenticated = self.admission.connections, self.admission.unauthenticated
        network = connections.networks.of(self.source)
        taken = connections.take(self.source, self)
        if not taken.admitted:
            if taken.refused_by == "total":
                return codes.CONNECTION_LIMIT, (
                    f"this broker serves at most {connections.total} connections"
                )
            return codes.NETWORK_CONNECTION_LIMIT, (
                f"this broker serves at most {connections.per_network} connections from one "
                f"network ({network})"
            )
        waiting = unauthenticated.take(self.source, self)
        if not waiting.admitted:
            connections.release(self)
            return codes.UNAUTHENTICATED_LIMIT, (
                f"too many connections without CONNECT ({unauthenticated.total} in all, "
                f"{unauthenticated.per_network} from one network); send CONNECT at once"
            )
        for victim in dict.fromkeys((*taken.displaced, *waiting.displaced)):
            victim.displace(network)
        return None

    def displace(self, network: str) -> None:
        """Make room for a newer connection: this one has not sent CONNECT yet."""
        self.broker.counters.connections_refused += 1
        if self._early is not None and self.transport is not None:
            self.closing = True  # still in its TLS handshake: a plaintext ERROR would be noise
            shut_down(self.transport)
            self.transport.abort()
            return
        detail = (
            f"closed before CONNECT: newer connections from {network} need the room; "
            "send CONNECT as soon as the connection is made"
        )
        self.abort(codes.UNAUTHENTICATED_LIMIT, detail)

    async def _secure(self, plain: asyncio.Transport) -> None:
        """The TLS handshake; within the CONNECT deadline, or the connection is dropped."""
        assert self.broker.tls is not None
        try:
            secured = await start_tls(
                self.loop,
                plain,
                self,
                self.broker.tls.context,
                self.config.connect_timeout_s,
                self._plain or PlainBytes(),
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

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.broker.read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        # Copied before anything else can read into the shared buffer.
        self.data_received(bytes(self.broker.read_buffer[:nbytes]))

    def data_received(self, data: bytes) -> None:
        try:
            self._received(data)
        except Exception as error:
            # Left to asyncio, this would drop the connection and serve on (an OSError not
            # even logged): the loop's exception handler stops the broker (service.py).
            self.loop.call_exception_handler(
                {
                    "message": f"session {self.session}: handling the client's frames failed",
                    "exception": error,
                    "protocol": self,
                }
            )

    def _received(self, data: bytes) -> None:
        if self._plain is not None and self._plain.take(data, self.transport):
            return  # the client's TLS bytes, for the handshake (event_loop.PlainBytes)
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
            if not self.connected and frame.command in ("CONNECT", "STOMP"):
                # It said what it wants: no longer displaceable; its login has its own budget.
                self.admission.unauthenticated.release(self)
                self.admission.connections.settle(self)
            if self._held:
                self._held.append(frame)  # behind the waiting SEND or login, in order
                self.pause_reading()
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
        self.admission.connections.release(self)
        self.admission.unauthenticated.release(self)
        self.broker.remove_peer(self, list(self.subscriptions.values()))
        self.broker.delete_temp_queues(self.temp_queues.close())
        self.subscriptions.clear()
        self.transactions.clear()
        self.state.close()
        self._replies.clear()
        self.transport = None

    def pause_writing(self) -> None:
        # Replies too wait for the client to read: no more frames until the buffer drains.
        self._socket_writable = False
        self.pause_reading()

    def resume_writing(self) -> None:
        self._socket_writable = True
        self.resume_reading_if_due()
        self.broker.peer_writable()

    # ---- what the broker calls -------------------------------------------------

    @property
    def writable(self) -> bool:
        return self._socket_writable and not self.closing and self.transport is not None

    def deliver(self, subscription: Subscription, message: QueuedMessage, ack_id: str) -> None:
        body = message.body or b""
        headers = [
            ("message-id", message.shown_id),
            ("destination", subscription.topic or self.temp_queues.shown_name(message.destination)),
        ]
        if not subscription.implicit_id:
            headers.insert(0, ("subscription", subscription.subscription_id))
        if subscription.ack_mode is not AckMode.AUTO:
            headers.append(("ack", ack_id))
            if self.version != "1.2":
                self._legacy_ack_ids.remember(
                    subscription.subscription_id, message.shown_id, ack_id
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
        shut_down(self.transport)
        self.transport.abort()

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
        """Read again once neither a waiting SEND, too many journal writes nor a full socket
        buffer (above the transport's low mark: a quarter of ``write_buffer_high_bytes``)
        hold it back."""
        low = self.config.max_writes_in_flight_per_connection // 2
        if (
            self._reading_paused
            and self._socket_writable
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


def _printable(text: str) -> str:
    return CONTROL_CHARACTERS.sub("\ufffd", text)


def shut_down(transport: asyncio.BaseTransport) -> None:
    """End the connection for the peer now, even if another process holds a copy of the socket
    (a child forked while a close of a hung share's file stalls it, see docs/safety.md): a
    close only drops our descriptor, a shutdown ends the connection itself."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        shutdown_socket(sock)
