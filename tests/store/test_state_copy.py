"""A new master's working state is a copy of what recovery rebuilt: equal, and independent."""

from __future__ import annotations

from primacy.store.format import RecordType
from primacy.store.state import JournalState


def recovered() -> JournalState:
    state = JournalState(dedupe_window_messages=5)
    for sequence in range(1, 9):
        state.apply(RecordType.SEND, sequence, f"q{sequence % 2}", f"m{sequence}", "seg-1", 64)
    state.apply(RecordType.ACK, 9, "q1", "m1", "seg-1", 128)
    return state


def test_a_copy_equals_what_a_checkpoint_round_trip_gives() -> None:
    state = recovered()
    assert state.copy(5).summary() == JournalState.from_json(state.to_json(), 5).summary()
    assert state.copy(5).pending_by_segment == state.pending_by_segment


def test_changing_a_copy_leaves_the_recovered_state_as_it_was() -> None:
    state = recovered()
    before = state.summary()
    working = state.copy(5)
    working.apply(RecordType.ACK, 10, "q0", "m2", "seg-2", 64)
    working.apply(RecordType.SEND, 11, "q0", "m11", "seg-2", 64)
    assert state.summary() == before
    assert state.pending_by_segment == {"seg-1": 7}
    assert working.summary() != before


def test_a_copy_with_a_smaller_window_keeps_the_newest_ids() -> None:
    working = recovered().copy(2)
    assert [key for key in working.seen_messages] == [("q1", "m7"), ("q0", "m8")]
    assert working.is_duplicate("q0", "m2")  # out of the window, but still pending
