"""The payloads of journal records: a SEND's headers, a FENCE's list, a CONTROL's event.

Part of the format (docs/journal-format.md, "Record bodies" and "Fences"); ``format.py``
frames records into batches, this module encodes and decodes what they carry.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from primacy.store.errors import FormatError

_HEADER_KEY_LEN = struct.Struct("<H")
_HEADER_VALUE_LEN = struct.Struct("<I")
_FENCE_COUNT = struct.Struct("<II")
_FENCE_ENTRY = struct.Struct("<QQQ")


@dataclass(frozen=True)
class FenceEntry:
    """One earlier-epoch segment and the length the new master found for it."""

    epoch: int
    first_sequence: int
    length: int


def encode_headers(headers: dict[str, str] | None) -> bytes:
    """Message headers as repeated (u16 key length, key, u32 value length, value), UTF-8."""
    if not headers:
        return b""
    parts: list[bytes] = []
    for key, value in headers.items():
        key_bytes, value_bytes = key.encode(), value.encode()
        if len(key_bytes) > 0xFFFF:
            raise FormatError(f"header name {key[:40]!r}... is longer than 65535 bytes")
        parts += [
            _HEADER_KEY_LEN.pack(len(key_bytes)),
            key_bytes,
            _HEADER_VALUE_LEN.pack(len(value_bytes)),
            value_bytes,
        ]
    return b"".join(parts)


def encode_fence(entries: list[FenceEntry]) -> bytes:
    """A FENCE record's payload: u32 count, u32 reserved, then (epoch, first_sequence, length)."""
    body = [_FENCE_COUNT.pack(len(entries), 0)]
    body += [_FENCE_ENTRY.pack(e.epoch, e.first_sequence, e.length) for e in entries]
    return b"".join(body)


def encode_control(event: dict[str, Any]) -> bytes:
    """A CONTROL record's payload: one JSON object, UTF-8, keys sorted."""
    return json.dumps(event, sort_keys=True, separators=(",", ":")).encode()


def utf8_text(data: memoryview, what: str) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"a record's {what} is not UTF-8") from None


def decode_headers(data: bytes | memoryview) -> dict[str, str]:
    """A SEND's headers; FormatError if the bytes are not a headers blob we wrote."""
    headers: dict[str, str] = {}
    view, at = memoryview(data), 0
    try:
        while at < len(view):
            (key_len,) = _HEADER_KEY_LEN.unpack_from(view, at)
            at += _HEADER_KEY_LEN.size
            key = utf8_text(view[at : at + key_len], "header name")
            at += key_len
            (value_len,) = _HEADER_VALUE_LEN.unpack_from(view, at)
            at += _HEADER_VALUE_LEN.size
            if at + value_len > len(view):
                raise FormatError("a header value runs past the headers")
            headers[key] = utf8_text(view[at : at + value_len], "header value")
            at += value_len
    except struct.error:
        raise FormatError("the headers are cut short") from None
    if at != len(view):
        raise FormatError("a header name runs past the headers")
    return headers


def decode_fence(payload: bytes) -> list[FenceEntry]:
    """The segments a FENCE record lists, in stored order."""
    try:
        count, _ = _FENCE_COUNT.unpack_from(payload, 0)
        if _FENCE_COUNT.size + count * _FENCE_ENTRY.size != len(payload):
            raise FormatError(f"a FENCE record of {len(payload)} bytes cannot list {count}")
        return [
            FenceEntry(
                *_FENCE_ENTRY.unpack_from(payload, _FENCE_COUNT.size + i * _FENCE_ENTRY.size)
            )
            for i in range(count)
        ]
    except struct.error:
        raise FormatError("a FENCE record is cut short") from None


def decode_control(payload: bytes) -> dict[str, Any]:
    try:
        event = json.loads(payload.decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FormatError(f"a CONTROL record's payload is not JSON: {exc}") from None
    if not isinstance(event, dict):
        raise FormatError("a CONTROL record's payload is not a JSON object")
    return event
