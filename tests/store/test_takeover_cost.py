"""A takeover's recovery work stays bounded however many epochs the journal has seen."""

from __future__ import annotations

from collections.abc import Callable

from primacy.store.journal import CHECKPOINT_AFTER_SEGMENTS_READ, JournalStore


def test_recovery_reads_a_bounded_number_of_segments_across_many_takeovers(
    open_store: Callable[..., JournalStore],
) -> None:
    segments_read = []
    for epoch in range(1, 41):
        store = open_store(epoch=epoch)
        store.append_send("/queue/a", f"m{epoch}", b"x").result()
        store.append_control({"event": "role", "to": "master", "epoch": epoch}).result()
        segments_read.append(store.recovery.report.segments_read)
        store.close()
    # Each new master reads at most the segments written since the last checkpoint.
    assert max(segments_read) <= CHECKPOINT_AFTER_SEGMENTS_READ + 1
    last = open_store(epoch=41)
    assert last.recovery.report.segments == 40
    assert sorted(last.recovery.state.pending["/queue/a"]) == sorted(f"m{e}" for e in range(1, 41))
