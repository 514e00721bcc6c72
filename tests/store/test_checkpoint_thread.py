"""A checkpoint is written on its own thread (store/checkpoint_thread.py): commits, and so
RECEIPTs, do not wait for it, and it holds the state as it was when it was taken."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from primacy.store import journal
from primacy.store.checkpoint import Checkpoint
from primacy.store.errors import JournalClosed
from primacy.store.journal import JournalStore


class HeldWrites:
    """Checkpoint writes wait until ``release`` is set: a share slow to take the file (what a
    checkpoint of a large state costs, 215 ms at 200 000 pending messages, made certain).
    ``writing`` is set once one was taken and waits to be written."""

    def __init__(self) -> None:
        self.writing = threading.Event()
        self.release = threading.Event()


@pytest.fixture
def held_checkpoints(monkeypatch: pytest.MonkeyPatch) -> HeldWrites:
    held = HeldWrites()
    write = journal.write_checkpoint

    def slow_write(directory: Path, checkpoint: Checkpoint) -> Path:
        held.writing.set()
        assert held.release.wait(30), "the test never let the checkpoint be written"
        return write(directory, checkpoint)

    monkeypatch.setattr(journal, "write_checkpoint", slow_write)
    return held


def test_commits_go_on_while_a_checkpoint_is_written_and_it_keeps_its_moment(
    open_store: Callable[..., JournalStore], held_checkpoints: HeldWrites
) -> None:
    store = open_store()
    taken_at = store.append_send("/queue/a", "m-1", b"one").result(timeout=10)
    written = store.checkpoint()
    assert held_checkpoints.writing.wait(10)
    # The checkpoint is being written (held): these commit and are acknowledged meanwhile.
    later = [store.append_send("/queue/a", f"m-{n}", b"x").result(timeout=10) for n in (2, 3)]
    store.append_ack("/queue/a", "m-1").result(timeout=10)
    assert not written.done()
    held_checkpoints.release.set()
    path = written.result(timeout=10)
    checkpoint = Checkpoint.from_bytes(path.read_bytes(), dedupe_window_messages=1000)
    # What it holds is the state when it was taken: m-1 pending, nothing after it.
    assert checkpoint.state.last_sequence == taken_at < min(later)
    assert list(checkpoint.state.pending["/queue/a"]) == ["m-1"]
    assert list(checkpoint.state.seen_messages) == [("/queue/a", "m-1")]  # the window too
    assert store.stats().pending_messages == 2  # the live state went on: m-2, m-3


def test_closing_writes_the_checkpoints_taken_first(
    open_store: Callable[..., JournalStore], held_checkpoints: HeldWrites
) -> None:
    store = open_store()
    store.append_send("/queue/a", "m-1", b"one").result(timeout=10)
    written = store.checkpoint()
    assert held_checkpoints.writing.wait(10)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # waiting for the checkpoint
    held_checkpoints.release.set()
    closer.join(10)
    assert not closer.is_alive()
    assert written.result(timeout=0).exists()
    with pytest.raises(JournalClosed):
        store.checkpoint()
