"""The lease policy (locker/lease.py) over every implementation of the share port."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from primacy.locker.lease import Lease, LeaseLost
from primacy.share.layout import ShareLayout
from primacy.share.posix import PosixShare
from primacy.share.records import EpochRecord
from tests.share.ports import Handles


def _claim_elsewhere(handles: Handles, node_id: str, **terms: object) -> int:
    """Another node claims the next epoch (it need not hold the lock to try)."""
    return handles().claim_epoch(EpochRecord(0, node_id=node_id, **terms))  # type: ignore[arg-type]


def test_release_marks_the_holder_record_released(handles: Handles) -> None:
    lease = Lease(handles(), "n1")
    assert lease.try_acquire()
    epoch = lease.claim_epoch()
    lease.release()
    record = handles().read_holder()
    assert record is not None and record.released and record.epoch == epoch


def test_lease_is_lost_once_a_later_epoch_exists(handles: Handles) -> None:
    lease = Lease(handles(), "old")
    assert lease.try_acquire()
    epoch = lease.claim_epoch()
    lease.revalidate()
    _claim_elsewhere(handles, "someone else")
    with pytest.raises(LeaseLost, match=f"epoch {epoch + 1}"):
        lease.revalidate()
    # A lost lease must not overwrite the lock's holder record on release.
    reader = handles()
    before = reader.read_holder()
    lease.release()
    assert reader.read_holder() == before


def test_lease_without_epoch_is_not_valid(handles: Handles) -> None:
    lease = Lease(handles(), "n1")
    assert lease.try_acquire()
    with pytest.raises(LeaseLost, match="no epoch"):
        lease.revalidate()


def test_epoch_claim_needs_the_lock(handles: Handles) -> None:
    with pytest.raises(LeaseLost):
        Lease(handles(), "n1").claim_epoch()


def test_terms_travel_from_one_master_to_the_next(handles: Handles) -> None:
    first = Lease(handles(), "first")
    assert first.try_acquire()
    first.claim_epoch(250)
    first.set_keep_alive(2000)
    first.abandon()
    second = Lease(handles(), "second")
    assert second.try_acquire()
    second.claim_epoch(250)
    (previous,) = second.terms_to_outlast()  # the first master outlasted nobody: it counts
    assert previous.lock_keep_alive_period_ms == 2000 and previous.node_id == "first"


def test_updating_terms_after_the_lease_is_lost_raises(handles: Handles) -> None:
    lease = Lease(handles(), "old")
    assert lease.try_acquire()
    lease.claim_epoch(250)
    _claim_elsewhere(handles, "new")
    with pytest.raises(LeaseLost):
        lease.set_keep_alive(5000)


def test_a_claim_that_never_outlasted_passes_on_what_it_waited_for(handles: Handles) -> None:
    first = Lease(handles(), "first")
    assert first.try_acquire()
    first.claim_epoch(2000)
    first.mark_outlasted()
    first.abandon()
    second = Lease(handles(), "second")  # killed during its takeover wait: never outlasted
    assert second.try_acquire()
    second.claim_epoch(100)
    assert second.terms_to_outlast()[0].node_id == "first"
    second.abandon()
    third = Lease(handles(), "third")
    assert third.try_acquire()
    third.claim_epoch(100)
    walked = third.terms_to_outlast()
    assert [r.node_id for r in walked] == ["second", "first"]
    assert max(r.lock_keep_alive_period_ms or 0 for r in walked) == 2000
    third.mark_outlasted()
    third.abandon()
    fourth = Lease(handles(), "fourth")
    assert fourth.try_acquire()
    fourth.claim_epoch(100)
    assert [r.node_id for r in fourth.terms_to_outlast()] == ["third"]


def test_a_rewritten_epoch_record_is_never_seen_empty(handles: Handles) -> None:
    # A claimant reads the previous record to learn how long to wait; a rewrite
    # (a keepalive edited at run time, the end of a takeover wait) must never
    # show it an empty or partial record.
    lease = Lease(handles(), "writer")
    assert lease.try_acquire()
    epoch = lease.claim_epoch(250)
    reader = handles()
    seen: list[object] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.append(reader.read_epoch(epoch))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for period in range(300):
            lease.set_keep_alive(250 + period)
    finally:
        stop.set()
        thread.join()
    assert seen and None not in seen
    record = reader.read_epoch(epoch)
    assert record is not None and record.lock_keep_alive_period_ms == 549
    assert reader.listed_epochs() == [epoch]


def test_a_graceful_release_marks_the_epoch_record_an_abandon_does_not(handles: Handles) -> None:
    first = Lease(handles(), "first")
    assert first.try_acquire()
    first.claim_epoch(250)
    first.mark_outlasted()
    first.release()  # stopped claiming, then let go: nothing left to outlast
    second = Lease(handles(), "second")
    assert second.try_acquire()
    second.claim_epoch(250)
    assert Lease.handed_over(second.terms_to_outlast())
    second.mark_outlasted()
    second.abandon()  # a crash or a lost lease: its claim may still run
    third = Lease(handles(), "third")
    assert third.try_acquire()
    third.claim_epoch(250)
    assert not Lease.handed_over(third.terms_to_outlast())
    reader = handles()
    assert reader.read_epoch(1).released  # type: ignore[union-attr]
    assert not reader.read_epoch(2).released  # type: ignore[union-attr]


def test_a_release_during_the_takeover_wait_hands_over_nothing(handles: Handles) -> None:
    first = Lease(handles(), "first")
    assert first.try_acquire()
    first.claim_epoch(2000)
    first.mark_outlasted()
    first.abandon()  # lost its lock unknowingly: may claim for 2 s more
    second = Lease(handles(), "second")
    assert second.try_acquire()
    second.claim_epoch(100)
    second.release()  # SIGTERM in its takeover wait: it never claimed, first may still
    third = Lease(handles(), "third")
    assert third.try_acquire()
    third.claim_epoch(100)
    walked = third.terms_to_outlast()
    assert [r.node_id for r in walked] == ["second", "first"]
    assert not Lease.handed_over(walked)


def test_the_walk_skips_an_empty_record_and_stops_at_a_legacy_one(share: Path) -> None:
    layout = ShareLayout(share)
    layout.epochs.mkdir()
    # Written before the outlasted term existed: it counts as outlasted.
    layout.epoch_file(1).write_text(
        '{"epoch": 1, "node_id": "legacy", "lock_keep_alive_period_ms": 700}'
    )
    layout.epoch_file(2).write_text("")  # a claimant that died before writing its record
    lease = Lease(PosixShare(share), "now")
    assert lease.try_acquire()
    lease.claim_epoch(100)
    assert lease.epoch == 3
    assert [r.node_id for r in lease.terms_to_outlast()] == ["legacy"]
