"""The client's own small STOMP 1.2 codec and one blocking connection over a socket.

``client/`` imports nothing else of primacy, so it does not share the
broker's codec; this one only needs to write client frames and read what a
broker sends. The tests check each codec against the other.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from primacy.client.errors import PROTOCOL, ClientError, ConnectionLost

_ESCAPE = str.maketrans({"\\": "\\\\", "\r": "\\r", "\n": "\\n", ":": "\\c"})
_UNESCAPE = {"\\": "\\", "r": "\r", "n": "\n", "c": ":"}
_MAX_FRAME_BYTES = 64 * 1024 * 1024
_READ_BYTES = 65536


@dataclass(frozen=True)
class Frame:
    command: str
    headers: dict[str, str]
    body: bytes = b""


def encode(command: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    """A client frame; CONNECT headers are not escaped (STOMP 1.2), every other frame's are."""
    escape = command != "CONNECT"
    lines = [command]
    for key, value in headers.items():
        lines.append(
            f"{key.translate(_ESCAPE)}:{value.translate(_ESCAPE)}" if escape else f"{key}:{value}"
        )
    if body:
        lines.append(f"content-length:{len(body)}")
    return ("\n".join(lines) + "\n\n").encode() + body + b"\x00"


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, chars = [], iter(text)
    for char in chars:
        if char == "\\":
            escaped = next(chars, "")
            if escaped not in _UNESCAPE:
                raise ClientError(PROTOCOL, f"undefined escape '\\{escaped}' from the broker")
            char = _UNESCAPE[escaped]
        out.append(char)
    return "".join(out)


class FrameReader:
    """Incremental parser for frames a broker sends (heart-beat EOLs are skipped)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames = []
        while (frame := self._next()) is not None:
            frames.append(frame)
        if len(self._buffer) > _MAX_FRAME_BYTES:
            raise ClientError(PROTOCOL, "the broker sent a frame larger than 64 MiB")
        return frames

    def _next(self) -> Frame | None:
        buffer = self._buffer
        start = 0
        while start < len(buffer) and buffer[start] in b"\r\n":
            start += 1
        del buffer[:start]
        end = buffer.find(b"\n\n")
        crlf = buffer.find(b"\n\r\n")
        if crlf >= 0 and (end < 0 or crlf < end):
            head_end, body_start = crlf, crlf + 3
        elif end >= 0:
            head_end, body_start = end, end + 2
        else:
            return None
        try:
            lines = [line.rstrip("\r") for line in buffer[:head_end].decode().split("\n")]
        except UnicodeDecodeError:
            raise ClientError(PROTOCOL, "the broker sent headers that are not UTF-8") from None
        command, headers = lines[0], dict[str, str]()
        for line in lines[1:]:
            key, _, value = line.partition(":")
            if command != "CONNECTED":
                key, value = _unescape(key), _unescape(value)
            headers.setdefault(key, value)
        length = headers.get("content-length")
        if length is not None:
            body_end = body_start + int(length)
            if len(buffer) <= body_end:
                return None
        else:
            body_end = buffer.find(b"\x00", body_start)
            if body_end < 0:
                return None
        frame = Frame(command, headers, bytes(buffer[body_start:body_end]))
        del buffer[: body_end + 1]
        return frame


class StompSocket:
    """One blocking STOMP connection; any socket trouble surfaces as ConnectionLost."""

    def __init__(self, sock: socket.socket, heart_beat_ms: int) -> None:
        self.sock = sock
        self.reader = FrameReader()
        self.heart_beat_ms = heart_beat_ms  # the broker's promised interval, 0 if none
        self._frames: list[Frame] = []

    @classmethod
    def open(
        cls, host: str, port: int, connect_timeout_s: float, heart_beat_ms: int
    ) -> StompSocket:
        """Connect and do the CONNECT/CONNECTED handshake, asking for broker heart-beats."""
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout_s)
        except OSError as error:
            raise ConnectionLost(f"cannot connect to {host}:{port}: {error}") from error
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = cls(sock, 0)
        try:
            connection.send(
                "CONNECT",
                {"accept-version": "1.2", "host": host, "heart-beat": f"0,{heart_beat_ms}"},
            )
            reply = connection.read(connect_timeout_s)
            if reply is None or reply.command != "CONNECTED":
                detail = reply.headers.get("message", reply.command) if reply else "no answer"
                raise ConnectionLost(f"{host}:{port} did not accept the connection: {detail}")
            offered = reply.headers.get("heart-beat", "0,0").split(",")[0]
            connection.heart_beat_ms = max(int(offered), heart_beat_ms) if int(offered) else 0
        except BaseException:
            connection.close()
            raise
        return connection

    def send(self, command: str, headers: dict[str, str], body: bytes = b"") -> None:
        try:
            self.sock.sendall(encode(command, headers, body))
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
            self._frames += self.reader.feed(data)
        return self._frames.pop(0)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()
