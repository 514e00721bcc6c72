"""STOMP over WebSocket: the bytes of a STOMP connection carried in WebSocket messages.

A ``WebSocketLink`` stands between an accepted socket and an unchanged ``StompConnection``:
to the socket (TCP, or TLS once its handshake is done) it is the asyncio protocol, to the
STOMP connection it is the transport. So everything above the bytes (admission, logins,
frames, receipts, flow control, heart-beats) is the TCP listener's own code, and the link
only turns bytes into WebSocket messages and back, with the sans-I/O WebSocket protocol of
the ``websockets`` library (the opening handshake, framing, masking, ping and close; this
module owns the socket, as ``connection.py`` does for TCP).

What a client sees (docs/stomp.md, "STOMP over WebSocket"): an HTTP upgrade on any path;
the subprotocol ``v12.stomp``, ``v11.stomp`` or ``v10.stomp``, the newest the client offers
(a client that offers none is served without one, as RabbitMQ's Web STOMP and ActiveMQ do;
one that offers only others is refused with 400); each STOMP frame the broker sends in one
message, text when it is UTF-8 (every frame but one with a binary body), and a heart-beat as
a message holding one end-of-line. What the client sends may split or join frames across
messages: the STOMP parser reads a stream. TLS (``stomp_tls_cert``) is the TCP listener's:
its handshake runs first, within the CONNECT deadline, and then the WebSocket handshake.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from websockets.exceptions import NegotiationError
from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

from primacy.broker import codes
from primacy.broker.connection import Admission, StompConnection
from primacy.broker.core import Broker
from primacy.broker.event_loop import PlainBytes, start_tls
from primacy.broker.tls import ServerTls

log = logging.getLogger("primacy.broker")

# Newest first: the first of these the client offers is the one chosen.
SUBPROTOCOLS = (Subprotocol("v12.stomp"), Subprotocol("v11.stomp"), Subprotocol("v10.stomp"))
# A WebSocket message may carry at most one STOMP frame at its size limit, and some room.
_MESSAGE_ROOM_BYTES = 64 * 1024
# How long a client has to answer a close frame before its socket is dropped.
_CLOSE_GRACE_S = 5.0
_DATA = frozenset({Opcode.TEXT, Opcode.BINARY, Opcode.CONT})  # ping and close: the library's


def choose_subprotocol(
    protocol: ServerProtocol, offered: Sequence[Subprotocol]
) -> Subprotocol | None:
    """The newest STOMP subprotocol the client offers; none if it offers none."""
    for subprotocol in SUBPROTOCOLS:
        if subprotocol in offered:
            return subprotocol
    if offered:
        raise NegotiationError(
            f"none of the subprotocols offered ({', '.join(offered)}) is STOMP: offer "
            + ", ".join(SUBPROTOCOLS)
        )
    return None


def new_link(broker: Broker, admission: Admission) -> WebSocketLink:
    """The protocol for one accepted socket of the WebSocket listener: a STOMP connection
    of the same broker and budgets as the TCP listener's, behind a WebSocket link."""
    stomp = StompConnection(broker, admission)
    stomp.handshakes_tls = False  # the link does it, below the WebSocket handshake
    return WebSocketLink(broker, stomp)


class WebSocketLink(asyncio.Protocol, asyncio.Transport):
    """One WebSocket connection: the socket's protocol, and the STOMP connection's transport."""

    def __init__(self, broker: Broker, stomp: StompConnection) -> None:
        super().__init__()
        self.broker = broker
        self.stomp = stomp
        limits = broker.config.frame_limits
        self.websocket = ServerProtocol(
            subprotocols=list(SUBPROTOCOLS),
            select_subprotocol=choose_subprotocol,
            max_size=limits.max_frame_bytes + _MESSAGE_ROOM_BYTES,
        )
        self.socket: asyncio.Transport | None = None
        self._waiting: list[bytes] = []  # STOMP bytes written before the handshake completed
        self._early: list[bytes] | None = None  # bytes received before TLS was in place
        self._plain: PlainBytes | None = None  # the client's TLS bytes, see _secure
        self._closing = False
        self._lost = False
        self._close_deadline: asyncio.TimerHandle | None = None
        self._handshake: asyncio.Task[None] | None = None  # TLS; held so it is not collected

    # ---- the socket's side: asyncio.Protocol ----------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.socket = transport  # type: ignore[assignment]
        self.stomp.connection_made(self)  # admission; a refusal closes this link at once
        if self._closing or self.socket is None:
            return
        tls = self.broker.tls
        if tls is not None:
            self._early = []
            self._plain = PlainBytes()
            self._handshake = self.broker.loop.create_task(self._secure(tls))

    async def _secure(self, tls: ServerTls) -> None:
        """The TLS handshake, as on the TCP listener: within the CONNECT deadline."""
        plain = self.socket
        assert plain is not None
        try:
            secured = await start_tls(
                self.broker.loop,
                plain,
                self,
                tls.context,
                self.broker.config.connect_timeout_s,
                self._plain or PlainBytes(),
            )
        except (TimeoutError, OSError) as error:  # ssl.SSLError is an OSError
            self.broker.counters.tls_handshakes_failed += 1
            log.warning(
                "%s: session %s (WebSocket): %s",
                codes.title(codes.TLS_HANDSHAKE_FAILED),
                self.stomp.session,
                str(error)[:300] or type(error).__name__,
            )
            plain.abort()
            self.connection_lost(error)  # the TLS layer never reports it to this protocol
            return
        if secured is None or self.socket is None:
            return  # closed while shaking hands
        self.socket = secured
        secured.set_write_buffer_limits(high=self.broker.config.write_buffer_high_bytes)
        early, self._early = self._early, None
        if early:
            self.data_received(b"".join(early))

    def data_received(self, data: bytes) -> None:
        if (
            self._plain is not None
            and self.socket is not None
            and self._plain.take(data, self.socket)
        ):
            return  # before the TLS layer: for the handshake (event_loop.PlainBytes)
        if self._early is not None:
            self._early.append(data)
            return
        self.websocket.receive_data(data)
        self._handle_events()

    def eof_received(self) -> bool:
        self.websocket.receive_eof()
        self._handle_events()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._closing = True
        self.socket = None
        if self._close_deadline is not None:
            self._close_deadline.cancel()
        self.stomp.connection_lost(exc)

    def pause_writing(self) -> None:
        self.stomp.pause_writing()

    def resume_writing(self) -> None:
        self.stomp.resume_writing()

    def _handle_events(self) -> None:
        for event in self.websocket.events_received():
            if isinstance(event, Request):
                self._answer(event)
            elif isinstance(event, Frame) and event.opcode in _DATA and not self._lost:
                self.stomp.data_received(bytes(event.data))
        error = self.websocket.parser_exc
        if error is not None and not self._closing:
            self._closing = True
            log.warning(
                "%s: session %s: %s",
                codes.title(codes.WEBSOCKET_PROTOCOL_ERROR),
                self.stomp.session,
                str(error)[:300],
            )
        self._flush()

    def _answer(self, request: Request) -> None:
        response = self.websocket.accept(request)
        self.websocket.send_response(response)
        if response.status_code != 101:
            self._closing = True
            log.warning(
                "%s: session %s: %d %s: %s",
                codes.title(codes.WEBSOCKET_HANDSHAKE_REFUSED),
                self.stomp.session,
                response.status_code,
                response.reason_phrase,
                str(self.websocket.handshake_exc)[:300],
            )
            return
        waiting, self._waiting = self._waiting, []
        for data in waiting:
            self._send(data)

    def _flush(self) -> None:
        """Write what the WebSocket protocol has for the socket. Once the closing handshake is
        done (or the opening one failed), close the socket; while the client has yet to answer
        a close frame, wait for it, at most ``_CLOSE_GRACE_S``: a socket closed with the
        client's close frame still on its way is reset, and a reset can make the client's
        kernel drop the last frames (the ERROR) before the client has read them."""
        socket = self.socket
        if socket is None:
            return
        for data in self.websocket.data_to_send():
            if data:
                socket.write(data)
            elif socket.can_write_eof():
                socket.write_eof()  # the closing handshake is done: the server ends TCP's
            else:
                socket.close()  # TLS cannot half-close
        if self.websocket.state is State.CLOSED or self.websocket.handshake_exc is not None:
            socket.close()
        elif self.websocket.close_expected() and self._close_deadline is None:
            self._close_deadline = self.broker.loop.call_later(_CLOSE_GRACE_S, self.abort)

    def _send(self, data: bytes) -> None:
        try:
            text = data.decode()
        except UnicodeDecodeError:
            self.websocket.send_binary(data)
        else:
            self.websocket.send_text(text.encode())

    # ---- the STOMP connection's side: asyncio.Transport -----------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or self.socket is None:
            return
        if self.websocket.state is State.CONNECTING:
            self._waiting.append(bytes(data))
            return
        if self.websocket.state is State.OPEN:
            self._send(bytes(data))
            self._flush()

    def close(self) -> None:
        """After the frames written so far: a close frame, then the socket once the client
        answers it (the STOMP connection aborts a client that does not, ``_CLOSE_GRACE_S``).
        Before the WebSocket is open there is nothing to say it in: the socket closes."""
        if self._closing:
            return
        self._closing = True
        if self.websocket.state is State.OPEN:
            self.websocket.send_close(1000)
            self._flush()
            if self.socket is not None:  # the client's close frame must be read
                self.socket.resume_reading()
        elif self.socket is not None:
            self.socket.close()

    def abort(self) -> None:
        self._closing = True
        if self.socket is not None:
            self.socket.abort()

    def is_closing(self) -> bool:
        return self._closing or self.socket is None or self.socket.is_closing()

    def pause_reading(self) -> None:
        if self.socket is not None and not self._closing:
            self.socket.pause_reading()

    def resume_reading(self) -> None:
        if self.socket is not None:
            self.socket.resume_reading()

    def is_reading(self) -> bool:
        return self.socket is not None and self.socket.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if self.socket is not None:
            self.socket.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return 0 if self.socket is None else self.socket.get_write_buffer_size()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "subprotocol":
            return self.websocket.subprotocol
        if self.socket is None:
            return default
        return self.socket.get_extra_info(name, default)
