"""Issue 44: a takeover from a followed state over many epoch tails reads what is new, not the
segments from their start.

Each takeover leaves one epoch tail the followed state does not cover whole (a stale master
may still append to it, and a torn batch can only be there), so ``recover(start=...)`` opens
each after the claim. It used to read 4 MiB from offset 0 of every one of them, and each
one's first batch again for its fence: 13 ms with one such segment, 110 to 310 ms with 8 or
9 on a loaded host. Real segment files written by a real ``JournalStore``.
"""

from __future__ import annotations

from pathlib import Path

from primacy.store.journal import JournalStore
from primacy.store.segments import SEGMENT_HEADER_MAX_BYTES, epoch_tails, list_segments
from tests.store.test_follower import (
    config,
    follower_for,
    no_fencing_check,
    records_only,
    take_over,
    taken_over_state,
    write,
)

EPOCHS = 6


def test_a_takeover_over_many_epoch_tails_reads_their_headers_and_what_is_new_only(
    tmp_path: Path,
) -> None:
    share = tmp_path / "share"
    for epoch in range(1, EPOCHS + 1):
        master = JournalStore.open(config(share), epoch=epoch, fencing_check=no_fencing_check)
        write(master, epoch * 10_000, 1_000)  # about 250 KB per epoch, two thirds left pending
        master.close()
    segments = list_segments(share / "journal")
    tails = epoch_tails(segments)
    assert len(tails) == EPOCHS
    tail_bytes = sum(s.path.stat().st_size for s in segments if s.name in tails)
    follower = follower_for(share)
    assert follower.poll().mode == "following"

    new_master = take_over(share, EPOCHS + 1, follower)
    try:
        assert new_master.opened_from == "followed"
        report = new_master.recovery.report
        # Every epoch tail is opened after the claim (the share's own evidence)...
        assert report.segments_read == EPOCHS
        # ...and what is read of each is its header: nothing was appended past the state.
        assert report.bytes_read <= EPOCHS * SEGMENT_HEADER_MAX_BYTES
        assert report.bytes_read < tail_bytes // 4
        assert new_master.bytes_read_at_open == 0  # the valid bytes past the followed state
        assert taken_over_state(new_master) == records_only(share)
    finally:
        new_master.close()


def test_a_tail_appended_after_the_last_poll_is_read_from_the_followed_position(
    tmp_path: Path,
) -> None:
    """What the master wrote after the follower's last poll is read from where the follower
    stopped (by its check after the claim); the segment is not read from offset 0 again."""
    share = tmp_path / "share"
    for epoch in (1, 2):
        master = JournalStore.open(config(share), epoch=epoch, fencing_check=no_fencing_check)
        write(master, epoch * 10_000, 1_000)
        if epoch == 2:
            break
        master.close()
    follower = follower_for(share)
    assert follower.poll().mode == "following"
    write(master, 30_000, 200)  # the master of epoch 2 goes on writing, then dies
    master.close()
    last = list_segments(share / "journal")[-1]
    new_master = take_over(share, 3, follower)
    try:
        assert new_master.opened_from == "followed"
        report = new_master.recovery.report
        assert report.bytes_read < last.path.stat().st_size // 4
        assert taken_over_state(new_master) == records_only(share)
    finally:
        new_master.close()
