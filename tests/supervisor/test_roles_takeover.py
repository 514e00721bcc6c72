"""The role machine taking over: claiming, recovering, pre_promote, the takeover wait, promotion.

Fake clock, no I/O. The wait rules are the safety argument's (docs/safety.md): earlier claims
are waited out unless the claim proved none is left.
"""

from __future__ import annotations

import pytest

from primacy.supervisor.machine import roles
from primacy.supervisor.machine.role_table import State
from primacy.supervisor.machine.roles import (
    ClaimEpoch,
    ClaimFailed,
    EpochClaimed,
    JournalFailed,
    LockResult,
    Revalidate,
    Role,
    ServingStopped,
    StartServing,
    StopServing,
    TryLock,
)
from tests.supervisor.role_driver import TIMINGS, Driver, opened, passed


def test_new_master_waits_the_takeover_delay_and_a_fresh_lease_check_before_serving() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(True))
    d.at(0.02, EpochClaimed(3))
    d.at(0.03, opened())
    assert d.machine.role is Role.ACQUIRED
    # An ordinary keepalive check during the wait does not promote.
    assert d.at(0.27) == [Revalidate(promotion=False)]
    assert d.kinds(d.at(0.28, passed(0.27))) == []
    assert d.machine.role is Role.ACQUIRED
    assert not d.machine.is_serving(0.28)
    ready = d.machine.next_deadline()
    assert ready == pytest.approx(0.295)
    # The promoting check is the one the shell runs as the tenure record's commit.
    assert d.at(ready) == [Revalidate(promotion=True)]
    assert d.kinds(d.at(0.30, passed(ready))) == [StartServing]
    assert d.machine.is_serving(0.30)


def test_promotion_waits_for_the_journal_even_after_the_takeover_delay() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(True))
    d.at(0.02, EpochClaimed(3))
    # Recovery is slow: the takeover wait passes, no promotion yet.
    assert d.kinds(d.at(1.0)) == []
    assert d.machine.role is Role.ACQUIRED
    assert d.kinds(d.at(1.1, opened())) == [Revalidate]
    assert d.kinds(d.at(1.11, passed(1.1))) == [StartServing]


def test_a_tenure_record_that_cannot_be_journaled_gives_the_lock_up_before_serving() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(True))
    d.at(0.02, EpochClaimed(3))
    d.at(0.03, opened())
    assert d.at(0.30) == [Revalidate(promotion=True)]  # the takeover wait is over
    actions = d.at(0.31, JournalFailed("share full"))
    assert d.kinds(actions)[-1] is StopServing
    assert d.machine.role is Role.DEMOTING and not d.machine.is_serving(0.31)


def test_a_journal_that_cannot_open_gives_the_lock_up_and_holds_off() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(True))
    d.at(0.02, EpochClaimed(3))
    actions = d.at(0.03, JournalFailed("stale epoch"))
    assert d.kinds(actions) == [StopServing]
    assert actions[-1].graceful  # type: ignore[union-attr]
    d.at(0.04, ServingStopped())
    assert d.machine.role is Role.SLAVE
    assert d.kinds(d.at(1.0)) == []  # holding off


def test_an_epoch_that_cannot_be_claimed_gives_the_lock_up_and_holds_off() -> None:
    # A full share refuses the epoch record: retrying at once burned an epoch a try (over a
    # hundred in one chaos trial). Nobody else holds the lock, so it is given back gracefully.
    d = Driver()
    d.at(0.0)
    assert ClaimEpoch in d.kinds(d.at(0.01, LockResult(True)))
    actions = d.at(0.02, ClaimFailed("claiming an epoch failed: [Errno 28] No space left"))
    assert d.kinds(actions) == [StopServing]
    assert actions[-1].graceful  # type: ignore[union-attr]
    d.at(0.03, ServingStopped())
    assert d.machine.role is Role.SLAVE
    assert d.kinds(d.at(1.0)) == []  # holding off: no TryLock
    assert TryLock in d.kinds(d.at(0.03 + TIMINGS.crash_loop_hold_off_s + 0.01))


def _serving_starts_at(previous_keep_alive_s: float, *, nothing_to_outlast: bool = False) -> float:
    """Claim at 0.02 after a master with that keepalive, pass every check: when do we serve?"""
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(True))
    d.at(
        0.02,
        EpochClaimed(
            3,
            previous_keep_alive_period_s=previous_keep_alive_s,
            nothing_to_outlast=nothing_to_outlast,
        ),
    )
    now = 0.021
    actions = d.at(now, opened())  # with nothing to wait for, it promotes at once
    while now < 10:
        for action in actions:
            result = isinstance(action, Revalidate) and d.at(now, passed(now))
            if result and StartServing in d.kinds(result):
                return now
        now = round(now + 0.005, 6)
        actions = d.at(now)
    raise AssertionError("never served")


def test_new_master_outlasts_a_previous_master_with_a_longer_keepalive() -> None:
    assert _serving_starts_at(2.0) == pytest.approx(0.02 + 2.2, abs=0.006)


def test_a_shorter_previous_keepalive_does_not_shorten_our_wait() -> None:
    assert _serving_starts_at(0.05) == pytest.approx(0.02 + TIMINGS.takeover_delay_s, abs=0.006)


def test_a_master_that_handed_over_leaves_no_claim_to_wait_for() -> None:
    # It released the lock after it stopped claiming: the first lease check after the
    # journal is open promotes, whatever its keepalive or our takeover delay.
    assert _serving_starts_at(2.0, nothing_to_outlast=True) == pytest.approx(0.021, abs=0.006)


def test_pre_promote_runs_during_the_takeover_wait_and_holds_promotion_until_it_allows() -> None:
    d = Driver(has_pre_promote=True)
    assert roles.RunPrePromote(3) in d.claimed()
    d.at(0.03, opened())
    # The wait is over, but the command has not answered: lease checks, no promotion.
    assert d.at(0.30) == [Revalidate()]
    d.at(0.301, passed(0.30))
    assert d.machine.role is Role.ACQUIRED
    # An earlier takeover's answer does not count: refused, for the shell to log.
    [refused] = d.only(0.31, roles.PrePromoteDone(2, None))
    assert isinstance(refused, roles.Refused) and d.machine.state is State.PRE_PROMOTE
    assert d.at(0.32) == []
    assert d.at(0.33, roles.PrePromoteDone(3, None)) == [Revalidate(promotion=True)]


def test_a_pre_promote_veto_gives_the_lock_up_and_holds_off() -> None:
    d = Driver(has_pre_promote=True)
    d.claimed()
    actions = d.at(0.1, roles.PrePromoteDone(3, "old host not fenced"))
    assert StopServing(graceful=True, reason="old host not fenced") in actions
    assert d.machine.role is Role.DEMOTING
    assert d.machine.hold_off_until == pytest.approx(0.1 + TIMINGS.crash_loop_hold_off_s)
