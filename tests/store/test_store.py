"""Appending and recovering: each sync policy, refusals, and a failed fencing check."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from primacy.store.checkpoint import Checkpoint
from primacy.store.config import SyncPolicy
from primacy.store.errors import JournalClosed, JournalFenced, MessageTooLarge, StaleEpoch
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from primacy.store.segments import list_segments
from primacy.store.state import MESSAGE_ID, SEQUENCE


@pytest.mark.parametrize("policy", list(SyncPolicy))
def test_appends_are_recovered_under_each_sync_policy(
    open_store: Callable[..., JournalStore], tmp_path: Path, policy: SyncPolicy
) -> None:
    store = open_store(sync_policy=policy, segment_max_bytes=16 * 1024)
    sends = [
        store.append_send(f"q{i % 3}", f"m{i}", f"body {i}".encode(), {"n": str(i)})
        for i in range(300)
    ]
    acks = [store.append_ack(f"q{i % 3}", f"m{i}") for i in range(0, 300, 2)]
    sequences = [f.result(timeout=10) for f in sends + acks]
    assert sequences == sorted(sequences) and len(set(sequences)) == 450
    store.close()

    result = recover(tmp_path / "share" / "journal")
    pending = result.state.pending
    assert result.state.last_sequence == max(sequences)
    assert sorted(m for q in pending.values() for m in q) == sorted(
        f"m{i}" for i in range(1, 300, 2)
    )
    assert list(pending["q1"]) == [f"m{i}" for i in range(1, 300, 2) if i % 3 == 1]
    assert result.report.damaged == () and result.report.torn_tails == ()

    reopened = open_store(epoch=2, sync_policy=policy)
    message = reopened.recovery.state.pending["q1"]["m7"]
    record = reopened.read_message(message)
    assert (record.payload, record.headers) == (b"body 7", {"n": "7"})
    assert reopened.recovery.state.is_duplicate("q2", "m8")  # acked, still in the window
    assert not reopened.recovery.state.is_duplicate("q1", "m8")  # ids are per destination


def test_a_message_over_max_message_size_is_refused_before_anything_is_written(
    open_store: Callable[..., JournalStore],
) -> None:
    store = open_store(max_message_size=10_000)
    before = store.stats().bytes_written
    with pytest.raises(MessageTooLarge, match=r"PRIMACY-1404 .*max_message_size"):
        store.append_send("q", "big", b"x" * 10_000)
    assert store.stats().bytes_written == before
    assert store.append_send("q", "small", b"x" * 100).result(timeout=5) > 0


def test_a_failed_fencing_check_acknowledges_nothing_and_stops_the_store(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    lost = False

    def check() -> None:
        if lost:
            raise RuntimeError("epoch 2 was claimed by another node")

    store = open_store(check=check)
    kept = store.append_send("q", "before", b"1").result(timeout=5)
    lost = True
    refused = store.append_send("q", "after", b"2")
    with pytest.raises(JournalFenced, match="lost mastership"):
        refused.result(timeout=5)
    with pytest.raises(JournalFenced):
        store.append_send("q", "later", b"3")
    assert store.stats().failure is not None and kept > 0


def test_the_fencing_check_starts_after_the_write(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    journal = tmp_path / "share" / "journal"
    seen_at_check: list[int] = []

    def check() -> None:
        seen_at_check.append(sum(p.stat().st_size for p in journal.glob("*.seg")))

    store = open_store(check=check)
    store.append_send("q", "m", b"x" * 5000).result(timeout=5)
    assert seen_at_check[-1] > 5000


def test_closed_store_refuses_writes_and_leaves_no_thread(
    open_store: Callable[..., JournalStore],
) -> None:
    import threading

    store = open_store()
    store.close()
    with pytest.raises(JournalClosed):
        store.append_send("q", "m", b"x")
    assert not [t for t in threading.enumerate() if t.name == "primacy-journal-writer"]


def test_opening_with_an_epoch_that_already_wrote_is_refused(
    open_store: Callable[..., JournalStore],
) -> None:
    open_store(epoch=3).close()
    with pytest.raises(StaleEpoch, match="claim a new epoch"):
        open_store(epoch=3)
    with pytest.raises(StaleEpoch):
        open_store(epoch=2)


def test_control_records_are_journaled(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    from primacy.store import tools

    store = open_store(sync_policy=SyncPolicy.NO_SYNC)
    store.append_control({"event": "role", "from": "ACQUIRED", "to": "MASTER"}).result(timeout=5)
    store.close()
    records: list[dict[str, object]] = []
    tools.dump(tmp_path / "share", records.append)
    assert [r["type"] for r in records] == ["FENCE", "CONTROL"]
    assert records[1]["event"] == {"event": "role", "from": "ACQUIRED", "to": "MASTER"}


def test_checkpoints_record_each_rotated_segment_as_complete_at_its_length(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    journal = tmp_path / "share" / "journal"
    store = open_store(segment_max_bytes=8 * 1024)

    def fill_and_checkpoint(first: int) -> Checkpoint:
        for number in range(first, first + 40):
            store.append_send("q", f"m{number}", b"x" * 1000).result(timeout=10)
        path = store.checkpoint().result(timeout=10)
        return Checkpoint.from_bytes(path.read_bytes(), dedupe_window_messages=1000)

    def expected_positions() -> dict[str, tuple[int, bool]]:
        ours = sorted(segment for segment in list_segments(journal) if segment.epoch == 1)
        return {
            segment.name: (segment.path.stat().st_size, segment is not ours[-1]) for segment in ours
        }

    # Rotations before the first checkpoint, then more after it: each checkpoint knows them all.
    for first in (0, 40):
        checkpoint = fill_and_checkpoint(first)
        positions = {
            name: (position.offset, position.complete)
            for name, position in checkpoint.positions.items()
        }
        assert positions == expected_positions()
        assert sum(complete for _, complete in positions.values()) >= 4 * (first // 40 + 1)


def test_a_new_master_hands_the_broker_what_was_pending_at_the_takeover(
    open_store: Callable[..., JournalStore],
) -> None:
    first = open_store()
    sequences = [first.append_send("q", f"m{i}", b"x").result(timeout=10) for i in range(4)]
    first.append_ack("q", "m0").result(timeout=10)
    first.close()
    successor = open_store(epoch=2)
    taken_over = [(m[MESSAGE_ID], m[SEQUENCE]) for m in successor.recovered_pending]
    assert taken_over == [("m1", sequences[1]), ("m2", sequences[2]), ("m3", sequences[3])]
    assert successor.recovered_last_sequence == sequences[-1] + 1  # the ACK
    # The store goes on from there with one state (not a copy of the recovered one): what
    # it writes now changes what it answers, and not what it handed over.
    successor.append_ack("q", "m1").result(timeout=10)
    successor.append_send("q", "m4", b"x").result(timeout=10)
    assert successor.stats().pending_messages == 3
    assert successor.location_of("q", "m1") is None and successor.location_of("q", "m4")
    assert [m[MESSAGE_ID] for m in successor.recovered_pending] == ["m1", "m2", "m3"]
    successor.close()
