"""The role machine as a master and on its way out: keepalive, claim expiry, demotion, the
exec child, pause, run-time timings, a graceful stop. Fake clock, no I/O."""

from __future__ import annotations

import pytest

from primacy.supervisor.machine import roles
from primacy.supervisor.machine.roles import (
    Exit,
    LeaseLost,
    Revalidate,
    Role,
    ServingStopped,
    StopRequested,
    StopServing,
    Tick,
    Timings,
    TryLock,
)
from tests.supervisor.role_driver import TIMINGS, Driver, passed


def test_master_claim_expires_one_keepalive_after_the_last_passed_check_started() -> None:
    d = Driver()
    d.become_master()
    started = d.machine.last_ok_revalidation_start
    assert started is not None
    assert d.machine.is_serving(started + 0.249)
    assert not d.machine.is_serving(started + 0.25)


CHECK_INTERVAL_S = TIMINGS.lock_keep_alive_period_s / roles.LEASE_CHECKS_PER_KEEPALIVE


def test_master_checks_its_lease_four_times_per_keepalive_period() -> None:
    """Issue 47: at two checks per period one late check lapsed the claim on a busy host."""
    d = Driver()
    d.become_master()
    started = d.machine.last_ok_revalidation_start
    assert started is not None
    assert roles.LEASE_CHECKS_PER_KEEPALIVE == 4
    assert d.machine.next_deadline() == pytest.approx(started + CHECK_INTERVAL_S)
    assert d.kinds(d.at(started + CHECK_INTERVAL_S)) == [Revalidate]


def test_lost_lease_demotes_at_once_without_a_graceful_release() -> None:
    d = Driver()
    d.become_master()
    d.at(d.now + 0.125)
    actions = d.at(d.now + 0.01, LeaseLost("lock file replaced"))
    assert StopServing(graceful=False, reason="lock file replaced") in actions
    assert d.machine.role is Role.DEMOTING
    assert not d.machine.is_serving(d.now)
    d.at(d.now + 0.01, ServingStopped())
    assert d.machine.role is Role.SLAVE
    assert d.machine.epoch is None


def test_a_hung_lease_check_demotes_when_it_outlives_the_keepalive_period() -> None:
    d = Driver()
    d.become_master()
    check_started = 0.5  # the next check was due at 0.425; binary fractions keep 0.25 exact
    assert d.kinds(d.at(check_started)) == [Revalidate]
    assert d.kinds(d.at(check_started + 0.2)) == []
    actions = d.at(check_started + 0.25)
    assert d.kinds(actions) == [StopServing]
    assert d.machine.role is Role.DEMOTING
    # The check still hangs: nothing more is due, so the shell sleeps rather than spins.
    assert d.machine.next_deadline() > d.now


def test_a_lease_check_late_only_by_garbage_collections_does_not_demote() -> None:
    """A collection holds the interpreter: a check the share answered cannot be heard until it
    ends. Its measured time (Tick.collecting_s) is not the share's; the claim lapses anyway."""
    d = Driver()
    d.become_master()
    check_started = 0.5
    assert d.kinds(d.at(check_started, Tick(collecting_s=1.0))) == [Revalidate]
    # 0.25 s later, 0.125 s of it in a collection: the share had 0.125 s, not the 0.25 s allowed.
    assert d.kinds(d.at(check_started + 0.25, Tick(collecting_s=1.125))) == []
    assert d.machine.role is Role.MASTER
    assert d.machine.next_deadline() == check_started + 0.25 + 0.125  # when it is overdue
    assert not d.machine.is_serving(check_started + 0.25)  # the claim did not wait for it
    # A check that answers now goes on as any check does.
    d.at(check_started + 0.3, passed(check_started))
    assert d.machine.role is Role.MASTER
    assert d.machine.claim_expires_at() == check_started + 0.25  # from when the check started


def test_a_lease_check_hung_past_the_collections_too_demotes() -> None:
    d = Driver()
    d.become_master()
    check_started = 0.5
    d.at(check_started, Tick(collecting_s=1.0))
    assert d.kinds(d.at(check_started + 0.375, Tick(collecting_s=1.125))) == [StopServing]
    assert d.machine.role is Role.DEMOTING


def test_graceful_stop_releases_the_lock_and_exits() -> None:
    d = Driver()
    d.become_master()
    actions = d.at(d.now + 0.01, StopRequested("SIGTERM"))
    assert StopServing(graceful=True, reason="SIGTERM") in actions
    assert d.machine.role is Role.STOPPING
    assert d.kinds(d.at(d.now + 0.01, ServingStopped())) == [Exit]
    assert d.machine.role is Role.STOPPED


def test_a_child_that_keeps_crashing_gives_the_lock_up_and_holds_off() -> None:
    d = Driver()
    d.become_master()
    assert d.kinds(d.at(d.now + 0.01, roles.ChildExited(1))) == [roles.RestartChild]
    assert d.kinds(d.at(d.now + 0.01, roles.ChildExited(1))) == [roles.RestartChild]
    actions = d.at(d.now + 0.01, roles.ChildExited(1))
    assert d.kinds(actions) == [StopServing]
    assert actions[-1] == StopServing(graceful=True, reason=actions[-1].reason)  # type: ignore[union-attr]
    d.at(d.now + 0.1, ServingStopped())
    assert d.machine.role is Role.SLAVE
    # No lock attempt during the hold-off, one right after it.
    assert d.kinds(d.at(d.now + 4.0)) == []
    assert d.kinds(d.at(d.now + 1.5)) == [TryLock]


def test_a_claim_lapse_kill_is_not_counted_as_a_crash() -> None:
    """Issue 47: the guardian's kill for a claim confirmed late (exit 125) fed the crash-loop
    hold-off, and a node waited 10 s before it took the lock again."""
    d = Driver(has_child=True)
    d.become_master()
    for _ in range(TIMINGS.child_max_restarts + 3):
        actions = d.at(d.now + 0.001, roles.ChildExited(roles.CLAIM_LAPSED_EXIT))
        assert d.kinds(actions) == [roles.RestartChild]
    assert d.machine.role is Role.MASTER and d.machine.hold_off_until == 0.0
    # The child's own crashes are still counted, from the first.
    assert d.kinds(d.at(d.now + 0.001, roles.ChildExited(1))) == [roles.RestartChild]


def test_after_a_claim_lapse_kill_the_child_restarts_once_a_lease_check_passes() -> None:
    """On a lapsed claim a new guardian would refuse to start the child: wait for a check."""
    d = Driver(has_child=True)
    d.become_master()  # its claim lasts until 0.55
    check = d.at(0.6)  # late: the claim has lapsed
    assert d.kinds(check) == [Revalidate]
    assert d.at(0.61, roles.ChildExited(roles.CLAIM_LAPSED_EXIT)) == []
    assert roles.RestartChild() in d.at(0.62, passed(0.6))
    assert roles.RestartChild() not in d.at(0.7, passed(0.68))  # once


def test_a_master_that_cannot_start_serving_steps_down_once_and_holds_off() -> None:
    d = Driver()
    d.become_master()
    actions = d.at(d.now + 0.01, roles.ServingFailed("cannot listen for STOMP"))
    assert d.kinds(actions) == [StopServing]
    assert d.machine.role is Role.DEMOTING and not d.machine.is_serving(d.now)
    d.at(d.now + 0.1, ServingStopped())
    assert d.machine.hold_off_until == pytest.approx(d.now - 0.1 + TIMINGS.crash_loop_hold_off_s)
    assert d.kinds(d.at(d.now + 4.0)) == []
    assert d.kinds(d.at(d.now + 1.5)) == [TryLock]


def test_paused_master_survives_a_slow_lease_check_but_not_a_failed_one() -> None:
    d = Driver()
    d.become_master()
    d.at(d.now, roles.PauseChanged(True))
    check_started = d.now + 0.125
    assert d.kinds(d.at(check_started)) == [Revalidate]
    assert d.kinds(d.at(check_started + 1.0)) == []  # e.g. frozen: no demotion while paused
    assert d.machine.role is Role.MASTER
    assert not d.machine.is_serving(check_started + 1.0)  # but it does not claim the role
    assert d.machine.next_deadline() > d.now  # and the shell sleeps rather than spins
    d.at(check_started + 1.01, passed(check_started + 1.0))
    assert d.machine.is_serving(check_started + 1.02)
    actions = d.at(check_started + 1.2, LeaseLost("epoch 2 was claimed"))
    assert d.kinds(actions) == [StopServing]


def test_paused_master_keeps_restarting_a_crashing_child() -> None:
    d = Driver()
    d.become_master()
    d.at(d.now, roles.PauseChanged(True))
    for _ in range(5):
        assert roles.RestartChild in d.kinds(d.at(d.now + 0.01, roles.ChildExited(1)))
    assert d.machine.role is Role.MASTER


def test_a_longer_keepalive_only_extends_claims_of_checks_started_after_it() -> None:
    d = Driver()
    d.become_master()
    start = d.machine.last_ok_revalidation_start
    assert start is not None
    d.at(d.now + 0.01, roles.TimingsChanged(Timings(0.1, 2.0, 2.2)))
    assert d.machine.claim_expires_at() == pytest.approx(start + 0.25)
    later = d.now + 0.05
    d.at(later)
    d.at(later + 0.001, passed(later))
    assert d.machine.claim_expires_at() == pytest.approx(later + 2.0)


def test_a_shorter_keepalive_shortens_the_current_claim_at_once() -> None:
    d = Driver()
    d.become_master()
    start = d.machine.last_ok_revalidation_start
    assert start is not None
    d.at(d.now + 0.01, roles.TimingsChanged(Timings(0.1, 0.05, 0.06)))
    assert d.machine.claim_expires_at() == pytest.approx(start + 0.05)


@pytest.mark.parametrize("has_child", [True, False])
def test_lease_checks_go_on_through_a_graceful_stop_only_for_a_child(has_child: bool) -> None:
    d = Driver(has_child=has_child)
    d.become_master()
    d.at(0.32, StopRequested("SIGTERM"))
    assert d.machine.role is Role.STOPPING
    # The shell sleeps until next_deadline: it must wake for the next check, or the
    # guardian's deadline passes while the loop sleeps.
    assert (d.machine.next_deadline() == pytest.approx(0.30 + CHECK_INTERVAL_S)) is has_child
    checks = d.at(0.45)
    assert (checks == [Revalidate()]) is has_child
    if has_child:
        d.at(0.46, passed(0.45))
        lead = roles.GUARDIAN_KILL_LEAD * TIMINGS.lock_keep_alive_period_s
        assert d.machine.child_may_live_until() == pytest.approx(0.45 + 0.25 - lead)
        d.at(0.47, LeaseLost("the lock is gone"))
        assert d.at(0.9) == []  # no more confirmations: the guardian's deadline runs out
    d.at(1.0, ServingStopped())
    assert d.machine.child_may_live_until() == float("-inf")


def test_a_lease_check_queued_behind_the_release_frees_the_worker_for_the_next_attempt() -> None:
    # Through a graceful step-down with a child the checks go on, so one may be queued
    # behind the release: it fails ("the lock is not held") after the node is a slave.
    # It must not be refused: until it ends, the slave tries no lock.
    d = Driver(has_child=True)
    d.become_master()
    d.at(0.31, roles.StepDownRequested("switchover to b"))
    assert d.at(0.43) == [Revalidate()]
    d.at(0.5, roles.ServingStopped())
    assert d.machine.role is Role.SLAVE
    assert d.at(0.7) == []  # the check has not ended yet
    assert d.kinds(d.at(0.71, LeaseLost("the lock is not held"))) == [TryLock]
