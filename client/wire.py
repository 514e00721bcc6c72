"""One blocking STOMP connection over a socket, speaking the project's one codec.

The frames go through ``broker/frames.py``, the codec the broker parses with
(sans-I/O, so it imports nothing of the broker's I/O); what is the client's
own is the socket: the handshake, timeouts and the broker's heart-beats.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Mapping

from primacy.broker.frames import Frame, FrameLimits, FrameParser, StompProtocolError, encode
from primacy.client.errors import PROTOCOL, ClientError, ConnectionLost

# What the client accepts from a broker: larger than any frame the broker accepts, so a
# message a broker stored is always readable, yet bounded against a broker gone wrong.
BROKER_FRAME_LIMITS = FrameLimits(
    max_frame_bytes=64 * 1024 * 1024, max_header_bytes=1024 * 1024, max_headers=1024
)
_READ_BYTES = 65536


def client_frame(command: str, headers: Mapping[str, str], body: bytes = b"") -> bytes:
    """The wire bytes of a client frame (STOMP 1.2; CONNECT headers are not escaped).

    Raises ValueError for headers the broker would refuse (a NUL or control character).
    """
    pairs = dict(headers)
    if body:
        pairs["content-length"] = str(len(body))
    return encode(Frame.make(command, pairs, body))


class StompSocket:
    """One blocking STOMP connection; any socket trouble surfaces as ConnectionLost."""

    def __init__(self, sock: socket.socket, heart_beat_ms: int) -> None:
        self.sock = sock
        self.parser = FrameParser(BROKER_FRAME_LIMITS)
        self.heart_beat_ms = heart_beat_ms  # the broker's promised interval, 0 if none
        self._frames: list[Frame] = []
        self._queued: list[bytes] = []  # frames to send with the next write or before a read

    @classmethod
    def open(
        cls,
        host: str,
        port: int,
        connect_timeout_s: float,
        heart_beat_ms: int,
        *,
        tls: ssl.SSLContext | None = None,
        login: str | None = None,
        passcode: str | None = None,
        client_id: str | None = None,
    ) -> StompSocket:
        """Connect (over TLS with ``tls``) and do the CONNECT/CONNECTED handshake, logging in
        when given a login, and asking for broker heart-beats."""
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout_s)
        except OSError as error:
            raise ConnectionLost(f"cannot connect to {host}:{port}: {error}") from error
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            try:
                sock = tls.wrap_socket(sock, server_hostname=host)
            except OSError as error:  # ssl.SSLError too: a certificate refused, say
                sock.close()
                raise ConnectionLost(f"TLS with {host}:{port} failed: {error}") from error
        connection = cls(sock, 0)
        headers = {"accept-version": "1.2", "host": host, "heart-beat": f"0,{heart_beat_ms}"}
        if login is not None:
            headers.update(login=login, passcode=passcode or "")
        if client_id is not None:  # names durable topic subscriptions (docs/stomp.md)
            headers["client-id"] = client_id
        try:
            connection.send("CONNECT", headers)
            reply = connection.read(connect_timeout_s)
            if reply is None or reply.command != "CONNECTED":
                detail = reply.get("message", reply.command) if reply else "no answer"
                raise ConnectionLost(f"{host}:{port} did not accept the connection: {detail}")
            offered = (reply.get("heart-beat") or "0,0").partition(",")[0]
            if not offered.isascii() or not offered.isdigit():
                raise ClientError(PROTOCOL, f"the broker offered heart-beat {offered[:32]!r}")
            connection.heart_beat_ms = max(int(offered), heart_beat_ms) if int(offered) else 0
        except BaseException:
            connection.close()
            raise
        return connection

    def send(self, command: str, headers: Mapping[str, str], body: bytes = b"") -> None:
        self.send_bytes(client_frame(command, headers, body))

    def send_later(self, command: str, headers: Mapping[str, str], body: bytes = b"") -> None:
        """Queue a frame: it goes with the next ``send``, or before ``read`` waits for the
        broker. A consumer's ACKs for a burst of messages leave in one write, not one each."""
        self._queued.append(client_frame(command, headers, body))

    def send_bytes(self, data: bytes) -> None:
        """Write frames already encoded (a producer encodes a message once, however often sent)."""
        if self._queued:
            data = b"".join([*self._queued, data])
            self._queued.clear()
        try:
            self.sock.sendall(data)
        except OSError as error:
            raise ConnectionLost(f"sending failed: {error}") from error

    def read(self, timeout_s: float | None) -> Frame | None:
        """The next frame, or None after ``timeout_s`` (None: no limit) without one.

        A broker that promised heart-beats and stays silent for three of them is
        taken for dead (frozen or cut off): ConnectionLost.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        silence_s = 3 * self.heart_beat_ms / 1000 if self.heart_beat_ms else None
        while not self._frames:
            waits = [w for w in (silence_s, _left(deadline)) if w is not None]
            wait_s = min(waits) if waits else None
            if deadline is not None and wait_s is not None and wait_s <= 0:
                return None
            if self._queued:  # what the broker may be waiting for goes before we wait for it
                self.send_bytes(b"")
            self.sock.settimeout(wait_s)
            try:
                data = self.sock.recv(_READ_BYTES)
            except TimeoutError:
                if silence_s is not None and wait_s == silence_s:
                    raise ConnectionLost(f"the broker was silent for {silence_s:.1f} s") from None
                continue
            except OSError as error:
                raise ConnectionLost(f"reading failed: {error}") from error
            if not data:
                raise ConnectionLost("the broker closed the connection")
            try:
                self._frames += self.parser.feed(data)
            except StompProtocolError as error:
                raise ClientError(PROTOCOL, f"the broker sent a bad frame: {error}") from None
        return self._frames.pop(0)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()
