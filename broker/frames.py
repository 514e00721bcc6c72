"""A sans-I/O STOMP frame codec: ``FrameParser.feed(bytes) -> frames`` and ``encode(frame)``.

No sockets, no clock: the caller owns the I/O. The parser enforces size limits
while bytes arrive (so a client cannot make it buffer more than the limit) and
raises only ``StompProtocolError``; after an error it stays failed, because a
STOMP stream cannot be resynchronised.

Rules followed: a line ends with LF or CR LF, and a CR anywhere else in a
header line is refused (STOMP 1.2); the first header of a repeated
name wins; header names and values are UTF-8; a body is ``content-length``
bytes when that header is present, else everything up to the first NUL;
end-of-line bytes between frames are heart-beats. What differs by protocol
version is escaping, per the version negotiated on the connection
(``FrameParser.version``, ``encode(frame, version)``): STOMP 1.0 escapes
nothing; 1.1 escapes ``\\n \\c \\\\``; 1.2 also ``\\r``. CONNECT and CONNECTED
frames escape nothing in any version (the version is not known yet).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from primacy.broker.codes import (
    CONNECT_TIMEOUT,
    FRAME_TOO_LARGE,
    HEADERS_TOO_LARGE,
    HEARTBEAT_TIMEOUT,
    INVALID_UTF8,
    JOURNAL_FAILED,
    LOOP_FAILED,
    MALFORMED_FRAME,
    SHUTTING_DOWN,
    TOO_MANY_HEADERS,
)

NUL = b"\x00"
HEARTBEAT = b"\n"

# Frames whose headers are not escaped, for compatibility with STOMP 1.0.
UNESCAPED_COMMANDS = frozenset({"CONNECT", "CONNECTED"})

VERSIONS = ("1.0", "1.1", "1.2")  # every version this codec speaks, oldest first
_ESCAPES = {"\\": "\\\\", "\r": "\\r", "\n": "\\n", ":": "\\c"}
_UNESCAPES = {"\\": "\\", "r": "\r", "n": "\n", "c": ":"}
# STOMP 1.1 defines every escape but \r.
_UNESCAPES_1_1 = {key: value for key, value in _UNESCAPES.items() if key != "r"}
_MAX_COMMAND_BYTES = 64
# Control characters a header may not hold (tab, LF and CR may: 1.1 and 1.2 escape LF and CR).
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# What 1.1 and 1.2 escape in a header; what no command may hold.
_TO_ESCAPE = re.compile("[\\\\\r\n:]")
_NOT_IN_COMMAND = re.compile("[\r\n:\x00]")

# The codes an ERROR frame's ``message`` starts with when the broker is going away (or gave up
# on the connection), not refusing the request: a client fails over and resends. Here, with
# the codec, because a client may use nothing else of the broker (DESIGN.md, "Layout").
TRANSIENT_ERROR_CODES = (
    HEARTBEAT_TIMEOUT,
    JOURNAL_FAILED,
    CONNECT_TIMEOUT,
    SHUTTING_DOWN,
    LOOP_FAILED,
)


class StompProtocolError(Exception):
    """The byte stream is not STOMP or breaks a limit; the connection must end.

    ``code`` is a stable message code (``PRIMACY-15xx``) the broker puts in its
    ERROR frame; ``str(error)`` is one sentence saying what was wrong.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class FrameLimits:
    """How much one frame may take; anything beyond is refused before it is buffered."""

    max_frame_bytes: int = 5 * 1024 * 1024 + 64 * 1024  # header section + body
    max_header_bytes: int = 64 * 1024  # command line and header lines
    max_headers: int = 128

    def __post_init__(self) -> None:
        if min(self.max_frame_bytes, self.max_header_bytes, self.max_headers) <= 0:
            raise ValueError("frame limits must be positive")


@dataclass(frozen=True)
class Frame:
    """One STOMP frame. Headers keep their order and repeats, as on the wire."""

    command: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    @classmethod
    def make(
        cls,
        command: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        body: bytes = b"",
    ) -> Frame:
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        return cls(command, tuple((str(k), str(v)) for k, v in pairs), bytes(body))

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of header ``name`` (STOMP 1.2: the first of repeats wins)."""
        for key, value in self.headers:
            if key == name:
                return value
        return default

    def header_dict(self) -> dict[str, str]:
        """Headers as a dict, first occurrence winning."""
        result: dict[str, str] = {}
        for key, value in self.headers:
            result.setdefault(key, value)
        return result


def encode(frame: Frame, version: str = "1.2") -> bytes:
    """The wire bytes of ``frame``, escaped as ``version`` says.

    Raises ValueError for a frame that cannot be written faithfully: a body
    holding NUL without a ``content-length``, a ``content-length`` that is not
    the body's length, a line break in a CONNECT/CONNECTED header, or a header
    holding a NUL or another control character (which the parser refuses).
    """
    length = frame.get("content-length")
    if length is None:
        if NUL in frame.body:
            raise ValueError("a body containing NUL needs a content-length header")
    elif length != str(len(frame.body)):
        raise ValueError(f"content-length {length!r} is not the body length {len(frame.body)}")
    escape = frame.command not in UNESCAPED_COMMANDS and version != "1.0"
    lines = [frame.command]
    for key, value in frame.headers:
        if CONTROL_CHARACTERS.search(key) or CONTROL_CHARACTERS.search(value):
            raise ValueError(f"header {key[:64]!r} holds a NUL or control character")
        if escape:
            lines.append(f"{_escape(key, version)}:{_escape(value, version)}")
        elif any(c in key + value for c in "\r\n") or ":" in key:
            raise ValueError(
                f"{frame.command} headers (STOMP {version}) cannot hold line breaks or ':' in names"
            )
        else:
            lines.append(f"{key}:{value}")
    if not frame.command or _NOT_IN_COMMAND.search(frame.command):
        raise ValueError(f"invalid command {frame.command!r}")
    return ("\n".join(lines) + "\n\n").encode() + frame.body + NUL


def _escape(text: str, version: str) -> str:
    if not _TO_ESCAPE.search(text):
        return text
    if version == "1.1" and "\r" in text:
        raise ValueError("STOMP 1.1 cannot carry a carriage return in a header")
    return "".join(_ESCAPES.get(c, c) for c in text)


def _unescape(text: str, version: str) -> str:
    if "\\" not in text:
        return text
    unescapes = _UNESCAPES_1_1 if version == "1.1" else _UNESCAPES
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        escaped = next(chars, "")
        if escaped not in unescapes:
            raise StompProtocolError(
                MALFORMED_FRAME, f"undefined escape sequence '\\{escaped}' in a header"
            )
        out.append(unescapes[escaped])
    return "".join(out)


@dataclass(frozen=True)
class _Head:
    """A parsed command line and headers, waiting for the body."""

    command: str
    headers: tuple[tuple[str, str], ...]
    head_len: int  # bytes of the header section, including its blank line
    content_length: int | None


class FrameParser:
    """Turns a byte stream into frames. One parser per connection."""

    def __init__(self, limits: FrameLimits | None = None, version: str = "1.2") -> None:
        self.limits = limits or FrameLimits()
        # The protocol version the connection negotiated; its owner sets it after CONNECT.
        self.version = version
        self.heartbeats_received = 0
        self._buffer = bytearray()
        self._head: _Head | None = None
        self._scanned = 0  # bytes already searched for the end of the head or body
        self._failed: StompProtocolError | None = None

    def feed(self, data: bytes) -> list[Frame]:
        """Take more bytes; return every frame they complete (possibly none)."""
        if self._failed is not None:
            raise self._failed
        self._buffer += data
        frames: list[Frame] = []
        try:
            while (frame := self._next_frame()) is not None:
                frames.append(frame)
        except StompProtocolError as error:
            self._failed = error
            self._buffer.clear()
            raise
        return frames

    def _next_frame(self) -> Frame | None:
        if self._head is None:
            self._skip_heartbeats()
            head = self._parse_head()
            if head is None:
                return None
            self._head, self._scanned = head, head.head_len
        return self._take_body(self._head)

    def _skip_heartbeats(self) -> None:
        buffer, at = self._buffer, 0
        while at < len(buffer):
            if buffer[at] == 0x0A:
                at += 1
                self.heartbeats_received += 1
            elif buffer[at] == 0x0D and at + 1 < len(buffer) and buffer[at + 1] == 0x0A:
                at += 2
                self.heartbeats_received += 1
            else:
                break
        if at:
            del buffer[:at]
            self._scanned = 0

    def _parse_head(self) -> _Head | None:
        buffer = self._buffer
        if buffer[:1] == b"\r" and len(buffer) == 1:
            return None  # maybe the start of a CR LF heart-beat
        end = _find_blank_line(buffer, max(0, self._scanned - 2))
        if end is None:
            self._scanned = len(buffer)
            if len(buffer) > self.limits.max_header_bytes:
                raise StompProtocolError(
                    HEADERS_TOO_LARGE,
                    f"the command and headers exceed {self.limits.max_header_bytes} bytes",
                )
            return None
        head_len = end
        if head_len > self.limits.max_header_bytes:
            raise StompProtocolError(
                HEADERS_TOO_LARGE,
                f"the command and headers exceed {self.limits.max_header_bytes} bytes",
            )
        raw = bytes(buffer[:head_len])
        command, headers = _plain_head(raw, self.limits.max_headers) or _head_by_lines(
            raw, self.limits.max_headers, self.version
        )
        return _Head(command, headers, head_len, self._content_length(headers))

    def _content_length(self, headers: tuple[tuple[str, str], ...]) -> int | None:
        for name, value in headers:
            if name == "content-length":
                if not value.isascii() or not value.isdigit():
                    raise StompProtocolError(
                        MALFORMED_FRAME, f"content-length {value[:32]!r} is not a byte count"
                    )
                length = int(value)
                if length > self.limits.max_frame_bytes:
                    raise StompProtocolError(
                        FRAME_TOO_LARGE,
                        f"the frame exceeds {self.limits.max_frame_bytes} bytes "
                        f"(content-length {length})",
                    )
                return length
        return None

    def _take_body(self, head: _Head) -> Frame | None:
        buffer, start = self._buffer, head.head_len
        if head.content_length is not None:
            end = start + head.content_length
            if len(buffer) <= end:
                self._check_frame_size(len(buffer))
                return None
            if buffer[end] != 0:
                raise StompProtocolError(
                    MALFORMED_FRAME, "the body is not followed by NUL where content-length says"
                )
        else:
            found = buffer.find(NUL, max(start, self._scanned))
            if found < 0:
                self._scanned = len(buffer)
                self._check_frame_size(len(buffer))
                return None
            end = found
        self._check_frame_size(end)
        frame = Frame(head.command, head.headers, bytes(buffer[start:end]))
        del buffer[: end + 1]
        self._head, self._scanned = None, 0
        return frame

    def _check_frame_size(self, size: int) -> None:
        if size > self.limits.max_frame_bytes:
            raise StompProtocolError(
                FRAME_TOO_LARGE, f"the frame exceeds {self.limits.max_frame_bytes} bytes"
            )


def _head_by_lines(
    raw: bytes, max_headers: int, version: str
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The command and headers of a head, line by line: every rule, and the error of the first
    line that breaks one (StompProtocolError)."""
    lines = raw.split(b"\n")
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines[:-2]]
    if len(lines) - 1 > max_headers:
        raise StompProtocolError(
            TOO_MANY_HEADERS, f"the frame has {len(lines) - 1} headers, more than {max_headers}"
        )
    command = _decode(lines[0], "command")
    printable = command.isascii() and command.isprintable() and " " not in command
    if not printable or len(lines[0]) > _MAX_COMMAND_BYTES or ":" in command:
        raise StompProtocolError(MALFORMED_FRAME, f"invalid command line {command[:64]!r}")
    return command, tuple(_parse_header(line, command, version) for line in lines[1:])


def _parse_header(line: bytes, command: str, version: str) -> tuple[str, str]:
    text = _decode(line, "header")
    name, colon, value = text.partition(":")
    if not colon:
        raise StompProtocolError(MALFORMED_FRAME, f"header line {text[:64]!r} has no ':'")
    if "\r" in text:
        # STOMP 1.2: a CR on the wire only ends a line (CR LF); one in a value is written
        # \r. Taken as data it would reach consumers as another byte than was meant.
        raise StompProtocolError(
            MALFORMED_FRAME,
            f"header {name[:64]!r} holds a carriage return that does not end its line "
            "(escape it as \\r)",
        )
    if command not in UNESCAPED_COMMANDS and version != "1.0":
        name, value = _unescape(name, version), _unescape(value, version)
    if CONTROL_CHARACTERS.search(name) or CONTROL_CHARACTERS.search(value):
        # NUL ends a frame for many parsers (stomp.py lost a MESSAGE's body to one);
        # no header of ours needs a control character but tab, CR and LF (escaped).
        raise StompProtocolError(
            MALFORMED_FRAME, f"header {name[:64]!r} holds a NUL or control character"
        )
    return name, value


def _plain_head(raw: bytes, max_headers: int) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """The command and headers of a head the per-line rules would accept unchanged, or None.

    What clients send almost always is plain: valid UTF-8, lines ended by LF alone, no
    escapes, no control characters. Checked once over the whole head (UTF-8 cannot hold a LF
    inside a character, so the head is valid exactly when each line is), such a head is
    split without the per-line work; anything else (an error to report, a CR, an escape)
    goes the per-line way, which says what is wrong with the first bad line.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\r" in text or "\\" in text or CONTROL_CHARACTERS.search(text):
        return None
    lines = text.split("\n")[:-2]
    command = lines[0]
    if (
        len(lines) - 1 > max_headers
        or not command.isascii()
        or not command.isprintable()
        or " " in command
        or ":" in command
        or len(command) > _MAX_COMMAND_BYTES
    ):
        return None
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            return None
        headers.append((name, value))
    return command, tuple(headers)


def _find_blank_line(buffer: bytearray, start: int) -> int | None:
    """The offset just past the first empty line (LF LF or LF CR LF), or None."""
    lf_lf = buffer.find(b"\n\n", start)
    # A LF CR LF ends first only if it lies wholly before the LF LF's end (it cannot share
    # the LF LF's first byte, which would have to be a CR).
    lf_cr_lf = buffer.find(b"\n\r\n", start, len(buffer) if lf_lf < 0 else lf_lf + 2)
    if lf_cr_lf >= 0:
        return lf_cr_lf + 3
    return lf_lf + 2 if lf_lf >= 0 else None


def _decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise StompProtocolError(INVALID_UTF8, f"the {what} is not valid UTF-8") from None
