"""The role machine, driven by events and a fake clock: no sleeps, no I/O."""

from __future__ import annotations

import pytest

from primacy.supervisor import roles
from primacy.supervisor.roles import (
    TRANSITIONS,
    ClaimEpoch,
    ClaimFailed,
    EpochClaimed,
    Exit,
    JournalFailed,
    JournalOpened,
    LeaseLost,
    LockResult,
    OpenJournal,
    Priority,
    Revalidate,
    RevalidationPassed,
    Role,
    RoleChanged,
    RoleMachine,
    RoleMachineError,
    ServingStopped,
    StartServing,
    StopRequested,
    StopServing,
    Tick,
    Timings,
    TryLock,
    YieldLock,
)

TICK = Tick()
TIMINGS = Timings(
    lock_acquire_sleep_interval_s=0.1,
    lock_keep_alive_period_s=0.25,
    takeover_delay_s=0.275,
    child_max_restarts=2,
    child_restart_window_s=60.0,
    crash_loop_hold_off_s=5.0,
)


class Driver:
    """Feeds events at chosen times and remembers the actions."""

    def __init__(self, priority: Priority = Priority.NORMAL) -> None:
        self.machine = RoleMachine(TIMINGS, priority)
        self.now = 0.0

    def at(self, when: float, event: roles.Event = TICK) -> list[roles.Action]:
        """Like the shell: the event, then a tick so due timers fire."""
        self.now = when
        actions = self.machine.handle(event, when)
        if not isinstance(event, Tick):
            actions += self.machine.handle(Tick(), when)
        return actions

    def kinds(self, actions: list[roles.Action]) -> list[type]:
        return [type(action) for action in actions if not isinstance(action, RoleChanged)]

    def become_master(self) -> None:
        assert self.kinds(self.at(0.0)) == [TryLock]
        assert self.kinds(self.at(0.01, LockResult(True))) == [ClaimEpoch]
        assert self.kinds(self.at(0.02, EpochClaimed(7))) == [OpenJournal]
        assert self.kinds(self.at(0.05, JournalOpened())) == []
        assert self.kinds(self.at(0.02 + TIMINGS.takeover_delay_s)) == [Revalidate]
        started = self.now
        assert self.kinds(self.at(self.now + 0.001, RevalidationPassed(started))) == [StartServing]
        assert self.machine.role is Role.MASTER


# ---- the table itself ---------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "trigger", "expected"),
    [
        (Role.STARTING, "lock_acquired", Role.ACQUIRED),
        (Role.STARTING, "lock_busy", Role.SLAVE),
        (Role.STARTING, "not_eligible", Role.SLAVE),
        (Role.SLAVE, "lock_acquired", Role.ACQUIRED),
        (Role.SLAVE, "stop", Role.STOPPED),
        (Role.ACQUIRED, "takeover_ready", Role.MASTER),
        (Role.ACQUIRED, "lease_lost", Role.DEMOTING),
        (Role.MASTER, "lease_lost", Role.DEMOTING),
        (Role.MASTER, "child_crash_loop", Role.DEMOTING),
        (Role.MASTER, "stop", Role.STOPPING),
        (Role.DEMOTING, "serving_stopped", Role.SLAVE),
        (Role.STOPPING, "serving_stopped", Role.STOPPED),
    ],
)
def test_transition_table(role: Role, trigger: str, expected: Role) -> None:
    assert TRANSITIONS[role][trigger] is expected


def test_every_role_is_in_the_table_and_slaves_never_jump_to_master() -> None:
    assert set(TRANSITIONS) == set(Role)
    assert Role.MASTER not in TRANSITIONS[Role.SLAVE].values()
    assert Role.MASTER not in TRANSITIONS[Role.STARTING].values()


def test_an_event_the_table_does_not_allow_raises() -> None:
    machine = RoleMachine(TIMINGS, Priority.NORMAL)
    with pytest.raises(RoleMachineError, match="serving_stopped"):
        machine.handle(ServingStopped(), 0.0)


# ---- slave behaviour ------------------------------------------------------------


def test_slave_tries_the_lock_every_acquire_interval() -> None:
    d = Driver()
    assert d.kinds(d.at(0.0)) == [TryLock]
    d.at(0.005, LockResult(False))
    assert d.machine.role is Role.SLAVE
    assert d.kinds(d.at(0.05)) == []
    assert d.machine.next_deadline() == pytest.approx(0.105)
    assert d.kinds(d.at(d.machine.next_deadline())) == [TryLock]


def test_no_second_lock_attempt_while_one_is_in_flight() -> None:
    d = Driver()
    d.at(0.0)
    assert d.kinds(d.at(5.0)) == []


def test_priority_never_does_not_try_the_lock() -> None:
    d = Driver(Priority.NEVER)
    actions = d.at(0.0)
    assert d.kinds(actions) == []
    assert d.machine.role is Role.SLAVE
    assert d.kinds(d.at(100.0)) == []


def test_lower_priority_yields_a_free_lock_until_its_delay_has_passed() -> None:
    d = Driver(Priority.NORMAL)
    d.at(0.0, roles.PeersSeen(Priority.HIGHEST))  # two levels above: waits 2 intervals
    d.at(0.0)
    assert d.kinds(d.at(0.01, LockResult(True))) == [YieldLock]
    d.at(0.11)
    assert d.kinds(d.at(0.12, LockResult(True))) == [YieldLock]
    d.at(0.22)
    assert d.kinds(d.at(0.23, LockResult(True))) == [ClaimEpoch]
    assert d.machine.role is Role.ACQUIRED


def test_equal_priorities_do_not_wait() -> None:
    d = Driver(Priority.NORMAL)
    d.at(0.0, roles.PeersSeen(Priority.NORMAL))
    d.at(0.0)
    assert d.kinds(d.at(0.01, LockResult(True))) == [ClaimEpoch]


# ---- taking over and serving ----------------------------------------------------


def test_new_master_waits_the_takeover_delay_and_a_fresh_lease_check_before_serving() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(True))
    d.at(0.02, EpochClaimed(3))
    d.at(0.03, JournalOpened())
    assert d.machine.role is Role.ACQUIRED
    # An ordinary keepalive check during the wait does not promote.
    assert d.at(0.27) == [Revalidate(promotion=False)]
    assert d.kinds(d.at(0.28, RevalidationPassed(0.27))) == []
    assert d.machine.role is Role.ACQUIRED
    assert not d.machine.is_serving(0.28)
    ready = d.machine.next_deadline()
    assert ready == pytest.approx(0.295)
    # The promoting check is the one the shell runs as the tenure record's commit.
    assert d.at(ready) == [Revalidate(promotion=True)]
    assert d.kinds(d.at(0.30, RevalidationPassed(ready))) == [StartServing]
    assert d.machine.is_serving(0.30)


def test_master_claim_expires_one_keepalive_after_the_last_passed_check_started() -> None:
    d = Driver()
    d.become_master()
    started = d.machine.last_ok_revalidation_start
    assert started is not None
    assert d.machine.is_serving(started + 0.249)
    assert not d.machine.is_serving(started + 0.25)


def test_master_checks_its_lease_twice_per_keepalive_period() -> None:
    d = Driver()
    d.become_master()
    started = d.machine.last_ok_revalidation_start
    assert started is not None
    assert d.machine.next_deadline() == pytest.approx(started + 0.125)
    assert d.kinds(d.at(started + 0.125)) == [Revalidate]


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
    check_started = d.now + 0.125
    assert d.kinds(d.at(check_started)) == [Revalidate]
    assert d.kinds(d.at(check_started + 0.2)) == []
    actions = d.at(check_started + 0.25)
    assert d.kinds(actions) == [StopServing]
    assert d.machine.role is Role.DEMOTING


def test_graceful_stop_releases_the_lock_and_exits() -> None:
    d = Driver()
    d.become_master()
    actions = d.at(d.now + 0.01, StopRequested("SIGTERM"))
    assert StopServing(graceful=True, reason="SIGTERM") in actions
    assert d.machine.role is Role.STOPPING
    assert d.kinds(d.at(d.now + 0.01, ServingStopped())) == [Exit]
    assert d.machine.role is Role.STOPPED


def test_slave_stops_at_once() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(False))
    assert d.kinds(d.at(0.02, StopRequested())) == [Exit]


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


def test_lock_result_arriving_after_stop_is_ignored() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, StopRequested())
    assert d.at(0.02, LockResult(True)) == []
    assert d.machine.role is Role.STOPPED


def test_master_left_makes_a_slave_try_at_once_instead_of_at_the_next_poll() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(False))
    assert d.kinds(d.at(0.02, roles.MasterLeft())) == [TryLock]


def test_master_left_during_an_attempt_retries_right_after_it() -> None:
    d = Driver()
    d.at(0.0)
    assert d.kinds(d.at(0.005, roles.MasterLeft())) == []
    assert d.kinds(d.at(0.01, LockResult(False))) == [TryLock]


def test_master_left_does_not_move_a_never_node() -> None:
    d = Driver(Priority.NEVER)
    d.at(0.0)
    assert d.kinds(d.at(0.01, roles.MasterLeft())) == []


def test_promotion_waits_for_the_journal_even_after_the_takeover_delay() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(True))
    d.at(0.02, EpochClaimed(3))
    # Recovery is slow: the takeover wait passes, no promotion yet.
    assert d.kinds(d.at(1.0)) == []
    assert d.machine.role is Role.ACQUIRED
    assert d.kinds(d.at(1.1, JournalOpened())) == [Revalidate]
    assert d.kinds(d.at(1.11, RevalidationPassed(1.1))) == [StartServing]


def test_a_tenure_record_that_cannot_be_journaled_gives_the_lock_up_before_serving() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(True))
    d.at(0.02, EpochClaimed(3))
    d.at(0.03, JournalOpened())
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
    actions = d.at(now, JournalOpened())  # with nothing to wait for, it promotes at once
    while now < 10:
        for action in actions:
            passed = isinstance(action, Revalidate) and d.at(now, RevalidationPassed(now))
            if passed and StartServing in d.kinds(passed):
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


def test_paused_slave_does_not_try_the_lock_and_resumes_after() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(False))
    d.at(0.02, roles.PauseChanged(True))
    assert d.kinds(d.at(5.0)) == []
    assert d.kinds(d.at(5.1, roles.MasterLeft())) == []
    assert d.kinds(d.at(5.2, roles.PauseChanged(False))) == [TryLock]


def test_paused_master_survives_a_slow_lease_check_but_not_a_failed_one() -> None:
    d = Driver()
    d.become_master()
    d.at(d.now, roles.PauseChanged(True))
    check_started = d.now + 0.125
    assert d.kinds(d.at(check_started)) == [Revalidate]
    assert d.kinds(d.at(check_started + 1.0)) == []  # e.g. frozen: no demotion while paused
    assert d.machine.role is Role.MASTER
    assert not d.machine.is_serving(check_started + 1.0)  # but it does not claim the role
    d.at(check_started + 1.01, RevalidationPassed(check_started + 1.0))
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


def test_priority_and_timings_change_at_run_time() -> None:
    d = Driver(Priority.NORMAL)
    d.at(0.0, roles.PriorityChanged(Priority.NEVER))
    assert d.kinds(d.at(0.01)) == []
    faster = Timings(0.05, 0.25, 0.275)
    d.at(0.02, roles.TimingsChanged(faster))
    assert d.kinds(d.at(0.03, roles.PriorityChanged(Priority.HIGH))) == [TryLock]
    d.at(0.05, LockResult(False))
    assert d.machine.next_deadline() == pytest.approx(0.10)  # the new 50 ms interval


def test_a_longer_keepalive_only_extends_claims_of_checks_started_after_it() -> None:
    d = Driver()
    d.become_master()
    start = d.machine.last_ok_revalidation_start
    assert start is not None
    d.at(d.now + 0.01, roles.TimingsChanged(Timings(0.1, 2.0, 2.2)))
    assert d.machine.claim_expires_at() == pytest.approx(start + 0.25)
    later = d.now + 0.05
    d.at(later)
    d.at(later + 0.001, RevalidationPassed(later))
    assert d.machine.claim_expires_at() == pytest.approx(later + 2.0)


def test_a_shorter_keepalive_shortens_the_current_claim_at_once() -> None:
    d = Driver()
    d.become_master()
    start = d.machine.last_ok_revalidation_start
    assert start is not None
    d.at(d.now + 0.01, roles.TimingsChanged(Timings(0.1, 0.05, 0.06)))
    assert d.machine.claim_expires_at() == pytest.approx(start + 0.05)


def _claimed(driver: Driver) -> list[roles.Action]:
    driver.at(0.0)
    driver.at(0.01, LockResult(True))
    return driver.at(0.02, EpochClaimed(3))


def test_pre_promote_runs_during_the_takeover_wait_and_holds_promotion_until_it_allows() -> None:
    d = Driver()
    d.machine.has_pre_promote = True
    assert roles.RunPrePromote(3) in _claimed(d)
    d.at(0.03, JournalOpened())
    # The wait is over, but the command has not answered: lease checks, no promotion.
    assert d.at(0.30) == [Revalidate()]
    d.at(0.301, RevalidationPassed(0.30))
    assert d.machine.role is Role.ACQUIRED
    d.at(0.31, roles.PrePromoteDone(2, None))  # an earlier takeover's answer does not count
    assert d.at(0.32) == []
    assert d.at(0.33, roles.PrePromoteDone(3, None)) == [Revalidate(promotion=True)]


def test_a_pre_promote_veto_gives_the_lock_up_and_holds_off() -> None:
    d = Driver()
    d.machine.has_pre_promote = True
    _claimed(d)
    actions = d.at(0.1, roles.PrePromoteDone(3, "old host not fenced"))
    assert StopServing(graceful=True, reason="old host not fenced") in actions
    assert d.machine.role is Role.DEMOTING
    assert d.machine.hold_off_until == pytest.approx(0.1 + TIMINGS.crash_loop_hold_off_s)


def _serving(driver: Driver) -> None:
    _claimed(driver)
    driver.at(0.03, JournalOpened())
    driver.at(0.30)
    driver.at(0.31, RevalidationPassed(0.30))
    assert driver.machine.role is Role.MASTER


@pytest.mark.parametrize("has_child", [True, False])
def test_lease_checks_go_on_through_a_graceful_stop_only_for_a_child(has_child: bool) -> None:
    d = Driver()
    d.machine.has_child = has_child
    _serving(d)
    d.at(0.32, StopRequested("SIGTERM"))
    assert d.machine.role is Role.STOPPING
    # The shell sleeps until next_deadline: it must wake for the next check, or the
    # guardian's deadline passes while the loop sleeps.
    assert (d.machine.next_deadline() == pytest.approx(0.30 + 0.125)) is has_child
    checks = d.at(0.45)
    assert (checks == [Revalidate()]) is has_child
    if has_child:
        d.at(0.46, RevalidationPassed(0.45))
        lead = roles.GUARDIAN_KILL_LEAD * TIMINGS.lock_keep_alive_period_s
        assert d.machine.child_may_live_until() == pytest.approx(0.45 + 0.25 - lead)
        d.at(0.47, LeaseLost("the lock is gone"))
        assert d.at(0.9) == []  # no more confirmations: the guardian's deadline runs out
    d.at(1.0, ServingStopped())
    assert d.machine.child_may_live_until() == float("-inf")
