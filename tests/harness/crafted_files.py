"""Files crafted to pass primacy's first checks and still not be ours (issues 27 and 43).

A random file is refused at its magic or CRC; these are not: a checkpoint with a valid
CRC whose JSON holds a number no node writes, a segment of a far epoch with a valid
header, a batch whose CRC holds over records we never wrote (``with_record_field``).
The unit tests, the real-process tests, the planting property test and the chaos
harness plant them alike. Every offset comes from ``store/format.py``'s layouts.
"""

from __future__ import annotations

import json
import os
import random
import struct
import time
from pathlib import Path

import crc32c

from primacy.share.layout import ShareLayout
from primacy.store import format as fmt
from primacy.store.checkpoint import CHECKPOINT_MAGIC, CHECKPOINT_VERSION, checkpoint_name
from primacy.store.segments import segment_name

# JSON numbers no node writes in a checkpoint, as their text: past a float, past a u64,
# the non-standard constants Python's json accepts, negative, fractional.
HOSTILE_NUMBERS = (
    "1e999",
    "-1e999",
    "NaN",
    "Infinity",
    "-Infinity",
    str(10**30),
    str(2**64),
    "-1",
    "1.5",
)
# Where in a checkpoint's body a hostile number goes (its shape is otherwise what
# ``write_checkpoint`` writes, version 4).
PLACES = ("epoch", "last_sequence", "pending sequence", "fence limit", "position offset")
_PLACEHOLDER = "__number__"


def checkpoint_bytes(body: bytes) -> bytes:
    """``body`` framed as a checkpoint: magic, version, its CRC32C and length (all valid)."""
    header = struct.pack("<8sIIQ", CHECKPOINT_MAGIC, CHECKPOINT_VERSION, crc32c.crc32c(body), 0)
    return header[:16] + struct.pack("<Q", len(body)) + body


def checkpoint_body(number: str, place: str) -> bytes:
    """A version-4 checkpoint body, valid but for ``number`` (JSON text) at ``place``."""
    value = {place: _PLACEHOLDER}.get
    body = {
        "epoch": value("epoch", 1),
        "state": {
            "last_sequence": value("last_sequence", 1),
            "dedupe_window_messages": 10,
            "destinations": ["/queue/q"],
            "segments": [segment_name(1, 1)],
            "pending": {
                "destination": [0],
                "message_id": ["planted"],
                "sequence": [value("pending sequence", 1)],
                "segment": [0],
                "batch_offset": [56],
            },
            "seen": {"destination": [0], "message_id": ["planted"], "sequence": [1]},
        },
        "positions": [[segment_name(1, 1), value("position offset", 0), False]],
        "fences": {"fence_epochs": [1], "limits": [[1, 1, value("fence limit", 0)]]},
    }
    return json.dumps(body).replace(f'"{_PLACEHOLDER}"', number).encode()


def plant_checkpoint(share: Path, number: str, place: str = "epoch") -> Path:
    """A CRC-valid checkpoint in ``share`` named newer than any a node wrote, holding
    ``number`` at ``place``."""
    directory = ShareLayout(share).checkpoints
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / checkpoint_name(10**15, 1)
    path.write_bytes(checkpoint_bytes(checkpoint_body(number, place)))
    return path


def resealed(batch: bytes | bytearray) -> bytes:
    """``batch`` with its CRC32C made whole again over whatever its bytes now say."""
    data = bytearray(batch)
    crc_at = fmt.field_offset(fmt.BATCH_HEADER_FIELDS, "crc32c")
    data[crc_at : crc_at + 4] = struct.pack("<I", crc32c.crc32c(bytes(data[fmt.BATCH_CRC_START :])))
    return bytes(data)


def with_record_field(batch: bytes, index: int, name: str, value: int) -> bytes:
    """``batch`` with field ``name`` of record ``index``'s header set to ``value``, CRC-valid:
    the CRC then proves the bytes whole, and only the record checks can tell they are not
    ours (a length that does not add up, a foreign epoch or sequence, an unknown type)."""
    code = dict(fmt.RECORD_HEADER_FIELDS)[name]
    at = (
        fmt.BATCH_HEADER_LEN
        + index * fmt.RECORD_HEADER_LEN
        + fmt.field_offset(fmt.RECORD_HEADER_FIELDS, name)
    )
    data = bytearray(batch)
    struct.pack_into("<" + code, data, at, value)
    return resealed(data)


def record_field(batch: bytes, index: int, name: str) -> int:
    """Field ``name`` of record ``index``'s header, as stored."""
    code = dict(fmt.RECORD_HEADER_FIELDS)[name]
    at = (
        fmt.BATCH_HEADER_LEN
        + index * fmt.RECORD_HEADER_LEN
        + fmt.field_offset(fmt.RECORD_HEADER_FIELDS, name)
    )
    (value,) = struct.unpack_from("<" + code, batch, at)
    return int(value)


def far_epoch_segment_bytes(epoch: int, first_sequence: int = 1) -> bytes:
    """A segment holding only a valid header of ``epoch``: 56 bytes, as issue 27 planted."""
    header = fmt.SegmentHeader(epoch, first_sequence, "evil", time.time_ns())
    return fmt.encode_segment_header(header)


def plant_far_epoch_segment(share: Path, epoch: int = 999_999, first_sequence: int = 1) -> Path:
    """``journal/<epoch>-<first sequence>.seg`` with a valid header, for an epoch nobody
    claimed (unless someone claims that far)."""
    journal = ShareLayout(share).journal
    journal.mkdir(parents=True, exist_ok=True)
    path = journal / segment_name(epoch, first_sequence)
    path.write_bytes(far_epoch_segment_bytes(epoch, first_sequence))
    return path


def plant_random(share: Path, rng: random.Random, next_epoch: int) -> str:
    """One crafted file of a random kind in ``share`` (never replacing a file that exists);
    what was planted, for the failure message."""
    if rng.random() < 0.5:
        number, place = rng.choice(HOSTILE_NUMBERS), rng.choice(PLACES)
        directory = ShareLayout(share).checkpoints
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / checkpoint_name(rng.randint(10**6, 10**15), rng.randint(1, 10**6))
        content = checkpoint_bytes(checkpoint_body(number, place))
        what = f"checkpoint with {number} at {place}"
    else:
        epoch = rng.choice([next_epoch + rng.randint(1, 5), rng.randint(10**5, 10**12)])
        first_sequence = rng.randint(1, 10**9)
        path = ShareLayout(share).journal / segment_name(epoch, first_sequence)
        path.parent.mkdir(parents=True, exist_ok=True)
        content = far_epoch_segment_bytes(epoch, first_sequence)
        what = f"segment of epoch {epoch} with a valid header"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return "nothing (the name was taken)"
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)
    return f"{what}: {path}"
