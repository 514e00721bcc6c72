"""The role machine as a slave: lock attempts, priorities, hints, pause, stop.

Fake clock, no I/O.
"""

from __future__ import annotations

import pytest

from primacy.supervisor.machine import roles
from primacy.supervisor.machine.roles import (
    ClaimEpoch,
    Exit,
    LockResult,
    Priority,
    Role,
    StopRequested,
    Timings,
    TryLock,
    YieldLock,
)
from tests.supervisor.role_driver import Driver


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


def test_slave_stops_at_once() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(False))
    assert d.kinds(d.at(0.02, StopRequested())) == [Exit]


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


def test_paused_slave_does_not_try_the_lock_and_resumes_after() -> None:
    d = Driver()
    d.at(0.0)
    d.at(0.01, LockResult(False))
    d.at(0.02, roles.PauseChanged(True))
    assert d.kinds(d.at(5.0)) == []
    assert d.kinds(d.at(5.1, roles.MasterLeft())) == []
    assert d.kinds(d.at(5.2, roles.PauseChanged(False))) == [TryLock]


def test_priority_and_timings_change_at_run_time() -> None:
    d = Driver(Priority.NORMAL)
    d.at(0.0, roles.PriorityChanged(Priority.NEVER))
    assert d.kinds(d.at(0.01)) == []
    faster = Timings(0.05, 0.25, 0.275)
    d.at(0.02, roles.TimingsChanged(faster))
    assert d.kinds(d.at(0.03, roles.PriorityChanged(Priority.HIGH))) == [TryLock]
    d.at(0.05, LockResult(False))
    assert d.machine.next_deadline() == pytest.approx(0.10)  # the new 50 ms interval
