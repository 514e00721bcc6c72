"""Checkpoint version 4 keeps the state as columns; version 3's rows still read the same, and
a column that does not add up makes the checkpoint unusable, never a different state."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import crc32c
import pytest

from primacy.share.layout import CHECKPOINTS_DIR_NAME
from primacy.store.checkpoint import CHECKPOINT_MAGIC, list_checkpoints
from primacy.store.config import StoreConfig
from primacy.store.format import RecordType
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from primacy.store.state import SEQUENCE, JournalState

HEADER = struct.Struct("<8sIIQ")


def a_state() -> JournalState:
    state = JournalState(dedupe_window_messages=50)
    for sequence in range(1, 40):
        segment = f"seg-{sequence // 10}"
        state.apply(
            RecordType.SEND, sequence, f"/queue/q{sequence % 3}", f"m{sequence}", segment, 8
        )
    for sequence in range(40, 50):
        state.apply(RecordType.ACK, sequence, f"/queue/q{sequence % 3}", f"m{sequence - 39}", "", 0)
    return state


def as_rows(state: JournalState) -> dict[str, Any]:
    """What checkpoint version 3 held: a list per pending message and per id of the window."""
    messages = sorted(
        (m for queue in state.pending.values() for m in queue.values()), key=lambda m: m[SEQUENCE]
    )
    return {
        "last_sequence": state.last_sequence,
        "dedupe_window_messages": state.dedupe_window_messages,
        # Each row: destination, message id, sequence, segment, offset.
        "pending": [list(m) for m in messages],
        "seen_messages": [[d, m, s] for (d, m), s in state.seen_messages.items()],
    }


def test_the_columns_give_back_the_state() -> None:
    state = a_state()
    again = JournalState.from_json(json.loads(json.dumps(state.to_json())), 50)
    assert again.summary() == state.summary()
    assert again.pending_by_segment == state.pending_by_segment


def test_version_3_rows_give_the_same_state() -> None:
    state = a_state()
    again = JournalState.from_json(json.loads(json.dumps(as_rows(state))), 50)
    assert again.summary() == state.summary()
    assert again.pending_by_segment == state.pending_by_segment


def _spoiled(change: str) -> dict[str, Any]:
    data = json.loads(json.dumps(a_state().to_json()))
    if change == "a negative name":
        data["seen"]["destination"][0] = -1
    elif change == "a name past the list":
        data["pending"]["destination"][0] = len(data["destinations"])
    elif change == "columns of unequal length":
        data["seen"]["sequence"].pop()
    elif change == "an id that is a number":
        data["seen"]["message_id"][3] = 7
    elif change == "a sequence that is text":
        data["pending"]["sequence"][0] = "12"
    elif change == "a segment list that is not a list":
        data["segments"] = "seg-1"
    return data


@pytest.mark.parametrize(
    "change",
    [
        "a negative name",
        "a name past the list",
        "columns of unequal length",
        "an id that is a number",
        "a sequence that is text",
        "a segment list that is not a list",
    ],
)
def test_a_column_that_does_not_add_up_is_refused(change: str) -> None:
    with pytest.raises((ValueError, TypeError, KeyError)):
        JournalState.from_json(_spoiled(change), 50)


def test_recovery_uses_a_version_3_checkpoint_left_by_an_older_release(tmp_path: Path) -> None:
    config = StoreConfig(share=tmp_path, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        for n in range(30):
            store.append_send("/queue/q", f"m{n}", b"body").result()
        for n in range(10):
            store.append_ack("/queue/q", f"m{n}").result()
        store.checkpoint().result()
    (path,) = list_checkpoints(config.journal_dir / CHECKPOINTS_DIR_NAME)
    raw = path.read_bytes()
    body = json.loads(raw[HEADER.size :])
    state = JournalState.from_json(body["state"], config.dedupe_window_messages)
    body["state"] = as_rows(state)
    old = json.dumps(body).encode()
    path.write_bytes(HEADER.pack(CHECKPOINT_MAGIC, 3, crc32c.crc32c(old), len(old)) + old)
    result = recover(config.journal_dir, dedupe_window_messages=config.dedupe_window_messages)
    assert result.report.checkpoint is not None and not result.report.skipped_checkpoints
    assert sorted(result.state.pending["/queue/q"]) == sorted(f"m{n}" for n in range(10, 30))
