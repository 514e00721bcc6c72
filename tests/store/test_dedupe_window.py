"""The dedupe window (store/dedupe_window.py) against the ``OrderedDict`` it replaced, and
across a checkpoint and a failover with stock stomp.py clients."""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from primacy.store.dedupe_window import KEYS_PER_PARTITION, DedupeWindow
from primacy.store.format import RecordType
from primacy.store.state import JournalState
from tests.broker.nodes import Masters, eventually, stored_state
from tests.broker.stomppy import StompPy


def reference_add(
    window: OrderedDict[tuple[str, str], int], capacity: int, key: tuple[str, str], sequence: int
) -> None:
    """What JournalState.apply did before: add, then drop the oldest past the capacity."""
    window[key] = sequence
    if len(window) > capacity:
        window.popitem(last=False)


@pytest.mark.parametrize("capacity", [0, 1, 7, KEYS_PER_PARTITION * 2 + 3])
def test_the_same_keys_in_the_same_order_as_the_ordered_dict(capacity: int) -> None:
    rng = random.Random(capacity)
    window, reference = DedupeWindow(capacity), OrderedDict[tuple[str, str], int]()
    ids = max(capacity * 3, 10)
    for sequence in range(1, capacity * 6 + 50):
        key = (f"/queue/{rng.randrange(3)}", f"m-{rng.randrange(ids)}")
        assert (key in window) == (key in reference)
        if key not in reference:  # apply adds only ids not in the window
            window.add(key, sequence)
            reference_add(reference, capacity, key, sequence)
        assert len(window) == len(reference)
    assert list(window.items()) == list(reference.items())
    assert list(window) == list(reference)


@pytest.mark.parametrize("capacity", [1, 2, 5])
def test_a_key_given_twice_keeps_its_place_and_takes_the_new_sequence(capacity: int) -> None:
    # A checkpoint of versions 2 and 3 lists the window as rows, where an id may come twice
    # (found by tests/store/test_checkpoint_streamed.py: the eviction met a key it had lost).
    rows = [(("", ""), 1), (("q", "a"), 2), (("", ""), 3), (("q", "b"), 4), (("q", "c"), 5)]
    reference = OrderedDict[tuple[str, str], int]()
    for key, sequence in rows:
        reference_add(reference, capacity, key, sequence)
    window = DedupeWindow(capacity, rows)
    assert list(window.items()) == list(reference.items())
    assert list(window.values()) == list(reference.values())
    # Built from the items (a checkpoint read back), and trimmed to a smaller window.
    assert list(DedupeWindow(capacity, reference.items()).items()) == list(reference.items())
    smaller = capacity // 2
    newest = list(reference)[len(reference) - smaller :]
    assert list(DedupeWindow(smaller, reference.items())) == newest


def test_no_table_of_a_full_window_holds_more_than_a_few_thousand_keys() -> None:
    # What keeps a rebuild out of the commit path: every dict it has stays small, however
    # many ids pass through (an OrderedDict of the window held all 100 000 in one table).
    state = JournalState(100_000)
    for sequence in range(1, 250_001):
        state.apply(RecordType.SEND, sequence, "/queue/a", f"m-{sequence}", "s", 0)
        state.apply(RecordType.ACK, sequence, "/queue/a", f"m-{sequence}", "s", 0)
    window = state.seen_messages
    assert len(window) == 100_000
    assert max(len(part) for part in window._parts) < 2 * KEYS_PER_PARTITION
    assert next(iter(window)) == ("/queue/a", "m-150001")


def test_the_window_survives_a_checkpoint_and_a_failover(masters: Masters) -> None:
    master = masters.start(dedupe_window_messages=5)
    producer, consumer = StompPy(master.address), StompPy(master.address)
    consumer.subscribe("/queue/a", "s", ack="auto")
    for n in range(10):
        assert producer.send("/queue/a", f"m{n}", **{"message-id": f"m-{n}"})
        assert consumer.message().headers["message-id"] == f"m-{n}"
    eventually(lambda: stored_state(masters.share).pending == {}, "every auto ack journaled")
    before = master.store._state.seen_messages
    assert [m for _, m in before] == [f"m-{n}" for n in range(5, 10)]
    master.store.checkpoint().result(timeout=10)
    producer.close()
    consumer.close()
    new = masters.failover(master, dedupe_window_messages=5)
    # The new master read the window from the checkpoint: the same ids, the same sequences.
    assert list(new.store._state.seen_messages.items()) == list(before.items())
    producer = StompPy(new.address)
    assert producer.send("/queue/a", "again", **{"message-id": "m-9"})  # in the window
    assert producer.send("/queue/a", "again", **{"message-id": "m-4"})  # left it
    assert list(stored_state(masters.share).pending["/queue/a"]) == ["m-4"]
    producer.close()
