"""A slave's judgement that the lock's holder stalled (locker/stall.py): by its own clock only."""

from __future__ import annotations

from primacy.locker.stall import StallWatch, sighting
from primacy.share.records import HolderInfo, NodeEntry


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _entry(node_id: str, updated: float, pid: int = 7) -> NodeEntry:
    return NodeEntry(node_id, "host-a", pid, "127.0.0.1:8008", "normal", "master", 3, updated)


def _holder(node_id: str, released: bool = False) -> HolderInfo:
    return HolderInfo(node_id, "host-a", 7, 1.0, 3, released)


def test_the_holders_entry_unchanged_for_the_threshold_is_a_stall() -> None:
    clock = Clock()
    watch = StallWatch(6.0, clock)
    seen = sighting(_holder("n1"), [_entry("n2", 5.0), _entry("n1", 50.0)])
    assert not watch.stalled(seen)
    clock.now += 5.9
    assert not watch.stalled(seen)
    clock.now += 0.1
    assert watch.stalled(seen)
    assert watch.unchanged_for_s() == 6.0


def test_any_change_of_the_entry_starts_the_count_again() -> None:
    clock = Clock()
    watch = StallWatch(6.0, clock)
    assert not watch.stalled(sighting(_holder("n1"), [_entry("n1", 50.0)]))
    clock.now += 5.0
    assert not watch.stalled(sighting(_holder("n1"), [_entry("n1", 51.0)]))  # refreshed
    clock.now += 5.0
    assert not watch.stalled(sighting(_holder("n1"), [_entry("n1", 51.0)]))
    clock.now += 1.0
    assert watch.stalled(sighting(_holder("n1"), [_entry("n1", 51.0)]))
    # The same timestamp from a restarted process (another pid) is another sighting.
    assert not watch.stalled(sighting(_holder("n1"), [_entry("n1", 51.0, pid=8)]))


def test_no_judgement_without_a_named_holder_and_its_entry() -> None:
    assert sighting(None, [_entry("n1", 50.0)]) is None
    assert sighting(_holder("n1", released=True), [_entry("n1", 50.0)]) is None
    assert sighting(_holder("n1"), [_entry("n2", 50.0)]) is None
    clock = Clock()
    watch = StallWatch(6.0, clock)
    watch.stalled(None)
    clock.now += 60
    assert not watch.stalled(None), "nothing seen is never a stall"


def test_a_reset_forgets_what_was_seen() -> None:
    clock = Clock()
    watch = StallWatch(1.0, clock)
    seen = sighting(_holder("n1"), [_entry("n1", 50.0)])
    watch.stalled(seen)
    clock.now += 2
    watch.reset()
    assert not watch.stalled(seen)
