"""Edits of segment files that tests of the store and of the replay both make."""

from __future__ import annotations

from pathlib import Path

import crc32c

from primacy.store import format as fmt


def rewrite_format_version(path: Path, version: int) -> None:
    """What another primacy release would write: an intact header of another format version."""
    data = bytearray(path.read_bytes())
    header_len = fmt.decode_segment_header(bytes(data)).header_len
    version_at = fmt.field_offset(fmt.SEGMENT_HEADER_FIELDS, "format_version")
    crc_at = fmt.field_offset(fmt.SEGMENT_HEADER_FIELDS, "header_crc32c")
    fixed = fmt.SEGMENT_HEADER_FIXED_LEN
    data[version_at : version_at + 2] = version.to_bytes(2, "little")
    crc = crc32c.crc32c(bytes(data[fixed:header_len]), crc32c.crc32c(bytes(data[:crc_at])))
    data[crc_at : crc_at + 4] = crc.to_bytes(4, "little")
    path.write_bytes(bytes(data))
