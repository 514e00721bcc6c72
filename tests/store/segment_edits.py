"""Edits of segment files that tests of the store and of the replay both make."""

from __future__ import annotations

from pathlib import Path

import crc32c

from primacy.store import format as fmt


def rewrite_format_version(path: Path, version: int) -> None:
    """What another primacy release would write: an intact header of another format version."""
    data = bytearray(path.read_bytes())
    header_len = fmt.decode_segment_header(bytes(data)).header_len
    data[8:10] = version.to_bytes(2, "little")
    crc = crc32c.crc32c(bytes(data[48:header_len]), crc32c.crc32c(bytes(data[:44])))
    data[44:48] = crc.to_bytes(4, "little")
    path.write_bytes(bytes(data))
