"""A checkpoint is written in pieces (issue 30): the same bytes as the whole body encoded at
once, in memory bounded by a piece, and all or nothing under its final name."""

from __future__ import annotations

import errno
import json
import os
import struct
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any
from unittest import mock

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primacy.store import checkpoint as checkpoint_module
from primacy.store.checkpoint import (
    CHECKPOINT_MAGIC,
    Checkpoint,
    SegmentPosition,
    list_checkpoints,
    write_checkpoint,
)
from primacy.store.fences import FenceTable
from primacy.store.format import RecordType
from primacy.store.segments import segment_name
from primacy.store.state import (
    BATCH_OFFSET,
    DESTINATION,
    MESSAGE_ID,
    SEGMENT,
    SEQUENCE,
    JournalState,
)

HEADER = struct.Struct("<8sIIQ")
# Names that JSON escapes: quotes, backslashes, control characters, non-ASCII, a lone
# surrogate, a line separator.
AWKWARD_NAMES = ['"q"', "back\\slash", "tab\tline\n\x00\x1f", "ünï", "日本", "\ud800", "\u2028"]


def written_whole(checkpoint: Checkpoint) -> bytes:
    """What ``write_checkpoint`` wrote before it streamed: every column built as a list, the
    body encoded by one ``json.dumps``. A streamed checkpoint must be these bytes."""
    state = checkpoint.state
    messages = sorted(
        (m for queue in state.pending.values() for m in queue.values()), key=lambda m: m[SEQUENCE]
    )
    names: dict[str, int] = {}
    segments: dict[str, int] = {}
    pending = {
        "destination": [names.setdefault(m[DESTINATION], len(names)) for m in messages],
        "message_id": [m[MESSAGE_ID] for m in messages],
        "sequence": [m[SEQUENCE] for m in messages],
        "segment": [segments.setdefault(m[SEGMENT], len(segments)) for m in messages],
        "batch_offset": [m[BATCH_OFFSET] for m in messages],
    }
    seen = {
        "destination": [names.setdefault(d, len(names)) for d, _ in state.seen_messages],
        "message_id": [message_id for _, message_id in state.seen_messages],
        "sequence": list(state.seen_messages.values()),
    }
    body: dict[str, Any] = {
        "epoch": checkpoint.epoch,
        "state": {
            "last_sequence": state.last_sequence,
            "dedupe_window_messages": state.dedupe_window_messages,
            "destinations": list(names),
            "segments": list(segments),
            "pending": pending,
            "seen": seen,
        },
        "positions": [[p.segment, p.offset, p.complete] for p in checkpoint.positions.values()],
        "fences": checkpoint.fences.to_json(),
    }
    data = json.dumps(body, separators=(",", ":")).encode()
    return HEADER.pack(CHECKPOINT_MAGIC, 4, crc32c.crc32c(data), len(data)) + data


def a_checkpoint(state: JournalState, epoch: int = 3) -> Checkpoint:
    positions = {
        name: SegmentPosition(name, 56 + n, complete=n % 2 == 0)
        for n, name in enumerate(["seg-a", *AWKWARD_NAMES[:2]])
    }
    fences = FenceTable.from_json({"fence_epochs": [2, 3], "limits": [[1, 1, 4096], [2, 7, 0]]})
    return Checkpoint(epoch, state, positions, fences)


def applied(records: list[tuple[str, str, str, int, int]], window: int) -> JournalState:
    """A state as a master builds it: each record applied in sequence order."""
    state = JournalState(window)
    for sequence, (kind, destination, message_id, segment, offset) in enumerate(records, 1):
        record_type = RecordType.SEND if kind == "send" else RecordType.ACK
        state.apply(record_type, sequence, destination, message_id, f"seg-{segment}", offset)
    return state


def from_rows(rows: list[tuple[str, str, int, int, int]], window: int) -> JournalState:
    """A state read from a foreign checkpoint of version 3: its messages in any order, a
    sequence given twice, the order of a destination's messages not the order of theirs."""
    data = {
        "last_sequence": 100,
        "pending": [
            [d, m, sequence, f"seg-{segment}", offset] for d, m, sequence, segment, offset in rows
        ],
        "seen_messages": [[d, m, sequence] for d, m, sequence, _, _ in rows],
    }
    return JournalState.from_json(data, window)


name = st.one_of(st.sampled_from(["/queue/a", "/queue/b", *AWKWARD_NAMES]), st.text(max_size=6))
record = st.tuples(
    st.sampled_from(["send", "send", "ack"]), name, name, st.integers(0, 4), st.integers(0, 2**40)
)
row = st.tuples(name, name, st.integers(0, 30), st.integers(0, 4), st.integers(0, 2**40))
state = st.one_of(
    st.builds(applied, st.lists(record, max_size=80), st.sampled_from([0, 1, 5, 1000])),
    st.builds(from_rows, st.lists(row, max_size=40), st.sampled_from([0, 5, 1000])),
)


def assert_same_checkpoint(actual: bytes, expected: bytes) -> None:
    """The same checkpoint as ``expected`` (``json.dumps``'s): byte for byte where every
    string is ASCII; with others, orjson (issue 44) writes them as UTF-8 where ``json.dumps``
    wrote ``\\u`` escapes: the same JSON to every reader, under a CRC32C of its own bytes."""
    magic, version, crc, length = HEADER.unpack_from(actual)
    body = actual[HEADER.size :]
    assert (magic, version, length, crc) == (CHECKPOINT_MAGIC, 4, len(body), crc32c.crc32c(body))
    assert json.loads(body.decode()) == json.loads(expected[HEADER.size :])
    if body.isascii():
        assert actual == expected


def write_in(directory: Path, checkpoint: Checkpoint) -> bytes:
    return write_checkpoint(directory, checkpoint).read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state, st.sampled_from([1, 2, 3, 4096]))
def test_a_streamed_checkpoint_is_the_bytes_of_the_whole_body_encoded_at_once(
    state: JournalState, values_per_piece: int
) -> None:
    checkpoint = a_checkpoint(state)
    expected = written_whole(checkpoint)
    with (
        tempfile.TemporaryDirectory() as directory,
        mock.patch.object(checkpoint_module, "_COLUMN_VALUES_PER_PIECE", values_per_piece),
    ):
        assert_same_checkpoint(write_in(Path(directory), checkpoint), expected)
    assert state.to_json() == json.loads(expected[HEADER.size :])["state"]


def test_columns_of_many_pieces_are_the_same_bytes(tmp_path: Path) -> None:
    records = [
        ("ack" if n % 5 == 4 else "send", AWKWARD_NAMES[n % 7], f"m{n // 2}", n // 900, n)
        for n in range(20_000)
    ]
    checkpoint = a_checkpoint(applied(records, window=9_000))
    assert len(checkpoint.state.seen_messages) > 2 * checkpoint_module._COLUMN_VALUES_PER_PIECE
    assert write_in(tmp_path, checkpoint) == written_whole(checkpoint)


def test_without_orjson_a_checkpoint_is_written_with_json_to_the_same_bytes(tmp_path: Path) -> None:
    # A Spark executor's Python has no orjson (docs/replay.md): the store module must import
    # there, and a writer without it writes what json.dumps writes (the same bytes for ASCII).
    records = [("send", AWKWARD_NAMES[n % 7], f"m{n}", n // 50, n) for n in range(300)]
    checkpoint = a_checkpoint(applied(records, window=200))
    with mock.patch.object(checkpoint_module, "orjson", None):
        without = write_in(tmp_path / "a", checkpoint)
    assert_same_checkpoint(without, written_whole(checkpoint))
    assert_same_checkpoint(write_in(tmp_path / "b", checkpoint), without)


def test_an_empty_state_is_the_same_bytes(tmp_path: Path) -> None:
    checkpoint = Checkpoint(1, JournalState(10), {}, FenceTable())
    assert write_in(tmp_path, checkpoint) == written_whole(checkpoint)


PENDING = 200_000


def test_a_checkpoint_is_written_in_far_less_memory_than_its_body(tmp_path: Path) -> None:
    state = JournalState(dedupe_window_messages=100_000)
    for sequence in range(1, PENDING + 1):
        destination, segment = f"/queue/orders-{sequence % 4}", segment_name(1, sequence // 2000)
        message_id = f"ID:producer-1-{sequence}"
        state.apply(RecordType.SEND, sequence, destination, message_id, segment, sequence * 1100)
    checkpoint = Checkpoint(1, state, {}, FenceTable())
    tracemalloc.start()
    try:
        path = write_checkpoint(tmp_path, checkpoint)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    body_bytes = path.stat().st_size - HEADER.size
    # Encoded whole, the peak was 2.9 times the body (34.3 MB for 11.9 MB); in pieces 0.19
    # (2.2 MB): the pending messages' references in sequence order, 8 bytes each, and a piece.
    assert peak_bytes < body_bytes / 4, (peak_bytes, body_bytes)


def test_short_writes_still_write_every_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = a_checkpoint(applied([("send", "q", f"m{n}", 0, n) for n in range(300)], 100))
    pwrite = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, data, offset: pwrite(fd, data[:7], offset))
    assert write_in(tmp_path, checkpoint) == written_whole(checkpoint)


def test_a_checkpoint_that_fails_midway_leaves_the_last_one_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [("send", "q", f"m{n}", 0, n) for n in range(3000)]
    last = write_checkpoint(tmp_path, a_checkpoint(applied(records[:10], 100)))
    pwrite, room = os.pwrite, [20_000]

    def full_disk(fd: int, data: bytes, offset: int) -> int:
        if len(data) > room[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        room[0] -= len(data)
        return pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_checkpoint(tmp_path, a_checkpoint(applied(records, 100)))
    assert room[0] < 20_000  # it failed midway, not at its first write
    assert sorted(tmp_path.iterdir()) == list_checkpoints(tmp_path) == [last]
