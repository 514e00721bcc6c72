"""The journal follower: a slave's state kept as the master writes, and every way it is dropped.

Real segment files written by a real ``JournalStore``; the follower reads them as a
slave on the same share would. Each test that drops the state also takes over, and
checks the new master recovered exactly what the full recovery recovers.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from primacy.store import format as fmt
from primacy.store import payloads
from primacy.store.checkpoint import list_checkpoints
from primacy.store.config import StoreConfig
from primacy.store.follower import Handover, JournalFollower
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from primacy.store.segments import list_segments, segment_name

Summary = Any


def no_fencing_check() -> None:
    """One master at a time in these tests: nothing to fence."""


@pytest.fixture
def share(tmp_path: Path) -> Path:
    return tmp_path / "share"


def config(share: Path, **settings: object) -> StoreConfig:
    settings.setdefault("node_id", "node-a")
    settings.setdefault("checkpoint_idle_s", 0)
    return StoreConfig(share=share, **settings)  # type: ignore[arg-type]


def write(store: JournalStore, start: int, count: int, ack_every: int = 3) -> None:
    sends = [
        store.append_send(f"q{i % 2}", f"m{i}", b"x" * 200) for i in range(start, start + count)
    ]
    for future in sends:
        future.result(timeout=10)
    acks = [store.append_ack(f"q{i % 2}", f"m{i}") for i in range(start, start + count, ack_every)]
    for future in acks:
        future.result(timeout=10)


def records_only(share: Path) -> Summary:
    """The state every record on the share describes, no checkpoint trusted."""
    return recover(share / "journal", use_checkpoint=False, log=False).state.summary()


def taken_over_state(store: JournalStore) -> Summary:
    """A new master's state after it closed: what it recovered, and its fence."""
    store.close()
    return store.recovery.state.summary()


def follower_for(share: Path, **kwargs: object) -> JournalFollower:
    return JournalFollower(share / "journal", 100_000, **kwargs)  # type: ignore[arg-type]


def take_over(share: Path, epoch: int, follower: JournalFollower) -> JournalStore:
    return JournalStore.open(
        config(share), epoch=epoch, fencing_check=no_fencing_check, follower=follower
    )


def test_a_follower_keeps_the_state_a_recovery_builds_and_a_takeover_reads_only_the_tail(
    share: Path,
) -> None:
    master = JournalStore.open(
        config(share, segment_max_bytes=16 * 1024), epoch=1, fencing_check=no_fencing_check
    )
    follower = follower_for(share)
    assert follower.poll().mode == "following"
    for round_ in range(5):  # across several rotations, read as they are written
        write(master, round_ * 100, 100)
        status = follower.poll()
        assert status.mode == "following" and status.lag_bytes == 0
    assert len(list_segments(share / "journal")) > 3
    write(master, 500, 40)  # the tail the follower has not seen
    master.close()  # a kill -9 is the same: nothing more is written

    followed_bytes = follower.status.position_bytes
    new_master = take_over(share, 2, follower)
    try:
        assert new_master.opened_from == "followed" and new_master.open_fallback is None
        assert taken_over_state(new_master) == records_only(share)
        report = new_master.recovery.report
        assert report.checkpoint is not None and report.checkpoint.startswith("followed state")
        assert report.segments_read == 1  # the last segment only: every other was read whole
        assert report.bytes_read < followed_bytes
        assert follower.status.mode == "handed_over"
        assert follower.hand_over() == "the followed state was handed over already"
    finally:
        new_master.close()


def test_a_torn_write_in_flight_is_waited_for_and_cut_at_takeover_as_recovery_cuts_it(
    share: Path,
) -> None:
    master = JournalStore.open(config(share), epoch=1, fencing_check=no_fencing_check)
    write(master, 0, 50)
    follower = follower_for(share)
    follower.poll()
    master.close()
    segment = list_segments(share / "journal")[-1].path
    batch = fmt.encode_batch(1, 10_000, 0, [fmt.EncodedRecord(fmt.RecordType.ACK, 0, b"q0", b"m0")])
    with segment.open("ab") as handle:
        handle.write(batch[: len(batch) // 2])  # half a batch: a write the reader sees under way
    status = follower.poll()
    assert status.mode == "following" and status.lag_bytes == len(batch) // 2
    new_master = take_over(share, 2, follower)
    try:
        assert new_master.opened_from == "followed"
        assert taken_over_state(new_master) == records_only(share)
        assert len(new_master.recovery.report.torn_tails) == 1
    finally:
        new_master.close()


def _followed_then(share: Path, change: Callable[[Path], None]) -> JournalFollower:
    """A follower that read a closed master's journal; then ``change`` to its last segment."""
    master = JournalStore.open(config(share), epoch=1, fencing_check=no_fencing_check)
    write(master, 0, 60)
    follower = follower_for(share)
    follower.poll()
    write(master, 60, 60)
    assert follower.poll().mode == "following"
    master.close()
    change(list_segments(share / "journal")[-1].path)
    return follower


def _truncate_last_batch(path: Path) -> None:
    data = path.read_bytes()
    os.truncate(path, len(data) - 8)


def _damage_a_read_batch(path: Path) -> None:
    """Flip a byte inside the last batch the follower applied; the file stays as long."""
    data = bytearray(path.read_bytes())
    data[-40] ^= 0xFF
    path.write_bytes(bytes(data))


def _replace(path: Path) -> None:
    copy = path.with_name(".copy")
    shutil.copyfile(path, copy)
    os.replace(copy, path)  # the same bytes in another file


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_truncate_last_batch, "truncated"),
        (_damage_a_read_batch, "changed under the follower"),
        (_replace, "replaced under the follower"),
    ],
)
def test_a_segment_changed_under_the_follower_drops_its_state_and_the_takeover_reads_all(
    share: Path, change: Callable[[Path], None], reason: str
) -> None:
    follower = _followed_then(share, change)
    new_master = take_over(share, 2, follower)  # checked after the claim, found changed
    try:
        assert new_master.opened_from == "full_recovery"
        assert reason in (new_master.open_fallback or "")
        assert follower.status.fallbacks == 1
        assert taken_over_state(new_master) == records_only(share)
    finally:
        new_master.close()


def test_damage_in_the_unread_tail_falls_back_and_the_full_recovery_serves_the_rest(
    share: Path,
) -> None:
    master = JournalStore.open(config(share), epoch=1, fencing_check=no_fencing_check)
    write(master, 0, 30)
    follower = follower_for(share)
    follower.poll()
    position = follower.status.position_bytes
    segment = list_segments(share / "journal")[-1].path
    size_before = segment.stat().st_size
    write(master, 30, 30, ack_every=1000)  # one SEND batch per message: several batches
    write(master, 60, 30, ack_every=1000)
    master.close()
    data = bytearray(segment.read_bytes())
    data[size_before + 20] ^= 0xFF  # the first unread batch: valid batches follow it
    segment.write_bytes(bytes(data))
    status = follower.poll()
    assert status.mode == "fallen_back" and "crc mismatch" in (status.last_fallback or "")
    # A start over damage keeps nothing: the full recovery after the claim decides.
    assert follower.poll().mode == "fallen_back"
    assert position > 0
    new_master = take_over(share, 2, follower)
    try:
        assert new_master.opened_from == "full_recovery"
        assert "damaged batch" in (new_master.open_fallback or "")
        assert len(new_master.recovery.report.damaged) == 1
        assert new_master.recovery.state.is_duplicate("q0", "m88")  # after the damage: kept
    finally:
        new_master.close()


def test_a_fence_of_a_later_epoch_drops_the_state_and_following_starts_again(
    share: Path,
) -> None:
    first = JournalStore.open(config(share), epoch=1, fencing_check=no_fencing_check)
    write(first, 0, 40)
    follower = follower_for(share)
    follower.poll()
    first.close()
    second = JournalStore.open(config(share), epoch=2, fencing_check=no_fencing_check)
    write(second, 40, 40)
    status = follower.poll()
    assert status.mode == "fallen_back" and "a fence of epoch 2" in (status.last_fallback or "")
    assert follower.poll().mode == "following"  # started again, fence included
    write(second, 80, 10)
    second.close()
    third = take_over(share, 3, follower)
    try:
        assert third.opened_from == "followed"
        assert taken_over_state(third) == records_only(share)
    finally:
        third.close()


def test_a_checkpoint_newer_than_the_followed_state_drops_it(share: Path) -> None:
    master = JournalStore.open(config(share), epoch=1, fencing_check=no_fencing_check)
    write(master, 0, 20)
    follower = follower_for(share)
    follower.poll()
    master.checkpoint().result(timeout=10)
    master.close()
    directory = share / "journal" / "checkpoints"
    newest = list_checkpoints(directory)[0]
    # A checkpoint past anything the segments hold (a master's the follower could not read).
    shutil.copyfile(newest, directory / "checkpoint-00000000000000999999-0000000001.ckpt")
    status = follower.poll()
    assert status.mode == "fallen_back" and "newer than the followed state" in (
        status.last_fallback or ""
    )


def test_a_followed_segment_retired_before_it_was_read_whole_drops_the_state(
    share: Path,
) -> None:
    master = JournalStore.open(config(share), epoch=1, fencing_check=no_fencing_check)
    write(master, 0, 20)
    follower = follower_for(share)
    follower.poll()
    master.close()
    for segment in list_segments(share / "journal"):
        segment.path.unlink()
    assert "gone before it was read" in (follower.poll().last_fallback or "")


def test_nothing_to_hand_over_before_the_first_read(share: Path) -> None:
    follower = follower_for(share)
    handed = follower.hand_over()
    assert not isinstance(handed, Handover) and "has not read the journal yet" in handed


def test_a_stale_masters_writes_past_a_fence_are_no_lag_and_never_applied(share: Path) -> None:
    first = JournalStore.open(config(share), epoch=1, fencing_check=no_fencing_check)
    write(first, 0, 30)
    first.close()
    second = JournalStore.open(config(share), epoch=2, fencing_check=no_fencing_check)
    write(second, 30, 10)
    follower = follower_for(share)
    assert follower.poll().mode == "following"
    # The master of epoch 1, not knowing it was fenced, appends a batch to its segment.
    stale = list_segments(share / "journal")[0]
    assert stale.epoch == 1
    record = fmt.EncodedRecord(fmt.RecordType.SEND, 0, b"q0", b"stale", b"", b"x")
    with stale.path.open("ab") as handle:
        handle.write(fmt.encode_batch(1, 100_000, 0, [record]))
    status = follower.poll()
    assert status.mode == "following" and status.lag_bytes == 0
    write(second, 40, 10)
    second.close()
    third = take_over(share, 3, follower)
    try:
        assert third.opened_from == "followed"
        assert not third.recovery.state.is_duplicate("q0", "stale")
        assert third.recovery.report.fenced_records == 1
        assert taken_over_state(third) == records_only(share)
    finally:
        third.close()


def test_a_fence_read_after_its_segments_header_still_drops_the_state(share: Path) -> None:
    """A new master creates its segment (header) before it writes its fence: a follower that
    lists the segment in between must not take the fence for an ordinary batch later."""
    first = JournalStore.open(config(share), epoch=1, fencing_check=no_fencing_check)
    write(first, 0, 20)
    first.close()
    follower = follower_for(share)
    follower.poll()
    last_sequence = follower.status.last_sequence
    segment = share / "journal" / segment_name(2, last_sequence + 1)
    segment.write_bytes(
        fmt.encode_segment_header(fmt.SegmentHeader(2, last_sequence + 1, "node-b", 0))
    )
    assert follower.poll().mode == "following"  # a header alone: nothing to judge yet
    fence = [payloads.FenceEntry(1, 1, list_segments(share / "journal")[0].path.stat().st_size)]
    record = fmt.EncodedRecord(fmt.RecordType.FENCE, 0, payload=payloads.encode_fence(fence))
    with segment.open("ab") as handle:
        handle.write(fmt.encode_batch(2, last_sequence + 1, 0, [record]))
    status = follower.poll()
    assert status.mode == "fallen_back" and "a fence of epoch 2" in (status.last_fallback or "")


def test_a_takeover_with_nothing_to_hand_over_stops_the_follower_all_the_same(
    share: Path,
) -> None:
    """A follower that had dropped its state when its node took over must not start following
    again: it would follow the journal its own node now writes and drop that at its fence."""
    master = JournalStore.open(config(share), epoch=1, fencing_check=no_fencing_check)
    write(master, 0, 10)
    master.close()
    follower = follower_for(share)
    assert isinstance(follower.hand_over(), str)  # nothing read yet: the full recovery runs
    new = take_over(share, 2, follower)
    try:
        write(new, 10, 10)
        status = follower.poll()
        assert status.mode == "handed_over" and status.last_sequence == 0
        assert follower.poll().fallbacks == 0
    finally:
        new.close()
    follower.restart()
    assert follower.poll().mode == "following"
