"""Checkpoints: the journal state at a known position, written atomically, read back verified.

File ``checkpoints/checkpoint-<last sequence>-<epoch>.ckpt``: 8-byte magic,
u32 version, u32 CRC32C of the body, u64 body length, then the body (UTF-8
JSON). Written to a temporary name, fsynced, renamed, and the directory
fsynced, so a reader sees a whole checkpoint or none. The body is written in
pieces as it is encoded, its CRC32C and length counted on the way, and the
header last, in the place left for it: a checkpoint is never whole in memory.

``newest_usable_checkpoint`` is the one reader of them: recovery's, and the
replay's (which takes its fences), bounded in what it reads.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import crc32c

try:
    import orjson
except ImportError:  # a Spark executor reads checkpoints, never writes one: its Python needs
    orjson = None  # type: ignore[assignment]  # numpy, pyarrow, crc32c only (docs/replay.md)

from primacy.share.layout import CHECKPOINTS_DIR_NAME
from primacy.share.safe_io import (
    create_new_file,
    fsync_directory,
    real_directory,
    regular_files_in,
    remove,
    replace_within,
)
from primacy.store.fences import FenceTable
from primacy.store.segments import SegmentRef, open_journal_file
from primacy.store.state import JournalState, count

CHECKPOINT_MAGIC = b"PRIMCKPT"
# 2: the dedupe window is keyed by destination and message id; 3: the fence table holds
# each segment's verdict instead of every fence; 4: the state is stored as columns, which
# a new master reads in half the time (read: 2 to 4; written: 4).
CHECKPOINT_VERSION = 4
_READABLE_VERSIONS = (2, 3, 4)
_HEADER = struct.Struct("<8sIIQ")
# Values of a column per piece of the body written: tens of KB of message ids. Encoded whole,
# the body made a peak of 3 times its size (issue 30: 12.7 MB for a full dedupe window), which
# the master then kept as RSS.
_COLUMN_VALUES_PER_PIECE = 4096
# Names as ``checkpoint_name`` writes them: ASCII digits, an epoch widened past 10 digits.
_NAME = re.compile(r"checkpoint-([0-9]{20})-([0-9]{10,20})\.ckpt", re.ASCII)


class CheckpointUnusable(ValueError):
    """A checkpoint file that is damaged, foreign, or refers to segments that are gone."""


@dataclass(frozen=True)
class SegmentPosition:
    """How much of one segment a checkpoint's state covers."""

    segment: str
    offset: int
    complete: bool  # no record of this segment past ``offset`` will ever count


@dataclass
class Checkpoint:
    """The state, the segment positions it covers, and the fences known when it was taken."""

    epoch: int
    state: JournalState
    positions: dict[str, SegmentPosition]
    fences: FenceTable

    def body_pieces(self) -> Iterator[bytes]:
        """The body, ``json.dumps(body, separators=(",", ":")).encode()``, in pieces."""
        body: dict[str, Any] = {
            "epoch": self.epoch,
            "state": self.state.json_columns(),
            "positions": [[p.segment, p.offset, p.complete] for p in self.positions.values()],
            "fences": self.fences.to_json(),
        }
        return _json_pieces(body)

    @classmethod
    def from_bytes(cls, raw: bytes, dedupe_window_messages: int) -> Checkpoint:
        if len(raw) < _HEADER.size:
            raise CheckpointUnusable("the checkpoint file is shorter than its header")
        magic, version, crc, length = _HEADER.unpack_from(raw, 0)
        body = raw[_HEADER.size :]
        if magic != CHECKPOINT_MAGIC or version not in _READABLE_VERSIONS:
            raise CheckpointUnusable("not a checkpoint of a supported version")
        if length != len(body) or crc32c.crc32c(body) != crc:
            raise CheckpointUnusable("the checkpoint fails its length or CRC32C check")
        try:
            # We write integers only: 1.5, 1e999 (an infinity), NaN are refused as they are
            # parsed, so no number can overflow later (issue 27: ``int(1e999)`` raised
            # OverflowError, and every node failed to open the journal).
            data = json.loads(body.decode(), parse_float=_refuse, parse_constant=_refuse)
            positions = {
                name: SegmentPosition(name, count(offset), bool(complete))
                for name, offset, complete in data["positions"]
            }
            return cls(
                epoch=count(data["epoch"]),
                state=JournalState.from_json(data["state"], dedupe_window_messages),
                positions=positions,
                fences=FenceTable.from_json(data["fences"]),
            )
        except (
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
            RecursionError,
            ArithmeticError,  # none is expected after the checks above: still not a crash
        ) as exc:
            # A valid CRC says only that the bytes are what was written: whoever wrote
            # them may not be us. Any shape we did not write makes the checkpoint unusable.
            raise CheckpointUnusable(f"the checkpoint's content is not usable: {exc!r}") from exc


def _json_pieces(value: Any) -> Iterator[bytes]:
    """``value`` as compact JSON: dicts key by key, each iterator (a column) a list written
    ``_COLUMN_VALUES_PER_PIECE`` values at a time, anything else by ``_dumps`` whole: the
    same text in pieces as whole."""
    if isinstance(value, dict):
        yield b"{"
        separator = b""
        for key, item in value.items():
            yield separator + _dumps(key) + b":"
            yield from _json_pieces(item)
            separator = b","
        yield b"}"
    elif isinstance(value, Iterator):
        yield b"["
        separator = b""
        while values := list(islice(value, _COLUMN_VALUES_PER_PIECE)):
            yield separator + _dumps(values)[1:-1]  # its brackets off: the pieces are one list
            separator = b","
        yield b"]"
    else:
        yield _dumps(value)


def _dumps(value: Any) -> bytes:
    """Compact JSON, UTF-8. orjson (issue 44: ``json.dumps`` was most of a takeover
    checkpoint's 265 ms for a full dedupe window); for integers and ASCII strings its bytes
    are ``json.dumps(value, separators=(",", ":"))``'s, and any other string is written as
    UTF-8 rather than a ``\\u`` escape: the same JSON text to every reader
    (``json.loads`` of the decoded body). What orjson refuses (a lone surrogate in a
    string, an integer past 64 bits) goes through ``json.dumps`` as before."""
    if orjson is not None:
        try:
            return orjson.dumps(value)
        except orjson.JSONEncodeError:
            pass
    return json.dumps(value, separators=(",", ":")).encode()


def _refuse(text: str) -> float:
    raise ValueError(f"{text[:40]} is not an integer: checkpoints hold integers only")


# A checkpoint is read whole and parsed, so its size is bounded by what it can hold: the
# pending messages and fences of the segments (each entry under twice its record) and the
# dedupe window (100 000 ids: about 10 MB). One far larger was not written by us.
_JOURNAL_FACTOR = 16
_SLACK_BYTES = 64 * 2**20


def newest_usable_checkpoint(
    journal_dir: Path, segments: list[SegmentRef], dedupe_window_messages: int, skipped: list[str]
) -> Checkpoint | None:
    """The newest checkpoint that reads back whole and whose incomplete segments are all
    still there, at least as long as it says; each one passed over goes to ``skipped``
    (name and why). None if there is none.

    Bounded: a file larger than the journal's segments could need is not read, and one
    that is read costs its own size (``read(n)`` reserves n bytes up front, and a bound
    that grows with the journal made a 26 GB request for a journal of 1.6 GB).
    """
    sizes = {}
    for segment in segments:
        try:
            sizes[segment.name] = segment.path.stat().st_size
        except FileNotFoundError:
            continue
    limit = _JOURNAL_FACTOR * sum(sizes.values()) + _SLACK_BYTES
    for path in list_checkpoints(journal_dir / CHECKPOINTS_DIR_NAME):
        try:
            with open_journal_file(path) as handle:
                size = os.fstat(handle.fileno()).st_size
                if size > limit:
                    raise CheckpointUnusable(
                        f"{size} bytes, more than a journal of {sum(sizes.values())} bytes "
                        "can need: not read"
                    )
                checkpoint = Checkpoint.from_bytes(handle.read(size), dedupe_window_messages)
            for position in checkpoint.positions.values():
                if not position.complete and sizes.get(position.segment, -1) < position.offset:
                    raise CheckpointUnusable(f"segment {position.segment} is missing or shorter")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            skipped.append(f"{path.name}: {exc}")
            continue
        return checkpoint
    return None


def checkpoint_name(last_sequence: int, epoch: int) -> str:
    return f"checkpoint-{last_sequence:020d}-{epoch:010d}.ckpt"


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoint files, newest (highest last sequence, then epoch) first."""
    found = [
        (int(m[1]), int(m[2]), name)
        for name in regular_files_in(directory)
        if (m := _NAME.fullmatch(name)) and checkpoint_name(int(m[1]), int(m[2])) == name
    ]
    return [directory / name for _, _, name in sorted(found, reverse=True)]


def write_checkpoint(directory: Path, checkpoint: Checkpoint) -> Path:
    """Write atomically: temporary file, fsync, rename, fsync the directory. A write that
    fails removes its temporary file."""
    real_directory(directory)
    final = directory / checkpoint_name(checkpoint.state.last_sequence, checkpoint.epoch)
    temporary = directory / f".{final.name}.{os.getpid()}.tmp"
    fd = create_new_file(temporary)  # a planted symlink there is removed, never followed
    try:
        try:
            _write_file(fd, checkpoint)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):  # the first error is the one to report
            remove(temporary)  # a checkpoint that failed on a full disk gives its space back
        raise
    replace_within(temporary, final)
    fsync_directory(directory)
    return final


def _write_file(fd: int, checkpoint: Checkpoint) -> None:
    """The body after the header's place, then the header, once its CRC and length are
    known."""
    crc, length = 0, 0
    for piece in checkpoint.body_pieces():
        _write_all(fd, piece, _HEADER.size + length)
        crc = crc32c.crc32c(piece, crc)
        length += len(piece)
    _write_all(fd, _HEADER.pack(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, crc, length), 0)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    """``data`` at ``offset``, however few bytes each call writes."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def prune_checkpoints(directory: Path, keep: int) -> None:
    """Delete all but the ``keep`` newest checkpoints.

    Temporary files are left alone: one may belong to another process mid-write.
    """
    for old in list_checkpoints(directory)[keep:]:
        remove(old)
