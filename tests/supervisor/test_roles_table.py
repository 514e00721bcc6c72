"""Every (state, event type) pair of the role table: where each event leads, what it asks of
the shell, and which events each state refuses (and so logs with a code)."""

from __future__ import annotations

import copy
from typing import get_args

import pytest

from primacy.supervisor.machine import roles
from primacy.supervisor.machine.role_table import State
from primacy.supervisor.machine.roles import (
    TRANSITIONS,
    ChildExited,
    ClaimEpoch,
    ClaimFailed,
    CloseJournal,
    EpochClaimed,
    Exit,
    JournalFailed,
    JournalOpened,
    LeaseLost,
    LockResult,
    MasterLeft,
    OpenJournal,
    PauseChanged,
    PeersSeen,
    PrePromoteDone,
    Priority,
    PriorityChanged,
    Refused,
    RestartChild,
    RevalidationPassed,
    Role,
    RoleChanged,
    RunPrePromote,
    ServingFailed,
    ServingStopped,
    StartServing,
    StepDownRequested,
    StopRequested,
    StopServing,
    Tick,
    TimingsChanged,
    TryLock,
)
from tests.supervisor.role_driver import TIMINGS, opened, passed, reach

S = State
# One event of each type, as the shell would post it to a machine reached by ``reach``
# (its epoch is 3, its last lease check started at 0.3).
SAMPLES: dict[type, roles.Event] = {
    Tick: Tick(),
    LockResult: LockResult(True),
    EpochClaimed: EpochClaimed(3),
    ClaimFailed: ClaimFailed("share full"),
    JournalOpened: opened(),
    JournalFailed: JournalFailed("stale epoch"),
    RevalidationPassed: passed(0.3),
    LeaseLost: LeaseLost("lock file replaced"),
    ChildExited: ChildExited(1),
    ServingStopped: ServingStopped(),
    StopRequested: StopRequested("SIGTERM"),
    StepDownRequested: StepDownRequested(),
    ServingFailed: ServingFailed("cannot listen"),
    MasterLeft: MasterLeft(),
    PauseChanged: PauseChanged(True),
    PriorityChanged: PriorityChanged(Priority.HIGH),
    TimingsChanged: TimingsChanged(TIMINGS),
    PeersSeen: PeersSeen(Priority.HIGH),
    PrePromoteDone: PrePromoteDone(3, None),
}
SETTINGS = (PauseChanged, PriorityChanged, TimingsChanged, PeersSeen)
DEMOTE = [StopServing]
# What a takeover step under way reports after a stop or demotion overtook it.
LATE_RESULTS = (EpochClaimed, ClaimFailed, JournalFailed, PrePromoteDone, RevalidationPassed)
LATE_RESULTS += (LeaseLost,)
# What a node on its way out hears and lets go by: late results, a child ending while it is
# stopped, a second step-down request, a hint for slaves.
WHILE_LEAVING = (*LATE_RESULTS, ChildExited, StepDownRequested, MasterLeft)
# Each event in each state, delivered at the instant ``reach`` got there: the state it leads
# to and the actions it asks for (role changes apart). A pair missing here must be refused.
EXPECTED: dict[State, dict[type, tuple[State, list[type]]]] = {
    S.STARTING: {
        Tick: (S.STARTING, [TryLock]),
        LockResult: (S.CLAIMING, [ClaimEpoch]),
        MasterLeft: (S.STARTING, []),
        StopRequested: (S.STOPPED, [Exit]),
    },
    S.SLAVE: {
        Tick: (S.SLAVE, []),  # the next attempt is an interval away
        LockResult: (S.CLAIMING, [ClaimEpoch]),
        MasterLeft: (S.SLAVE, []),  # only brings the next attempt forward
        StopRequested: (S.STOPPED, [Exit]),
        RevalidationPassed: (S.SLAVE, []),  # a check queued behind the release
        LeaseLost: (S.SLAVE, []),
    },
    S.CLAIMING: {
        Tick: (S.CLAIMING, []),
        EpochClaimed: (S.RECOVERING, [OpenJournal]),
        ClaimFailed: (S.DEMOTING, DEMOTE),
        LeaseLost: (S.DEMOTING, DEMOTE),
        StopRequested: (S.STOPPING, DEMOTE),
        MasterLeft: (S.CLAIMING, []),
    },
    S.RECOVERING: {
        Tick: (S.RECOVERING, []),
        JournalOpened: (S.WAITING, []),
        JournalFailed: (S.DEMOTING, DEMOTE),
        LeaseLost: (S.DEMOTING, DEMOTE),
        StopRequested: (S.STOPPING, DEMOTE),
        MasterLeft: (S.RECOVERING, []),
    },
    S.RECOVERING_PRE_PROMOTE: {
        Tick: (S.RECOVERING_PRE_PROMOTE, []),
        JournalOpened: (S.PRE_PROMOTE, []),
        JournalFailed: (S.DEMOTING, DEMOTE),
        PrePromoteDone: (S.RECOVERING, []),
        LeaseLost: (S.DEMOTING, DEMOTE),
        StopRequested: (S.STOPPING, DEMOTE),
        MasterLeft: (S.RECOVERING_PRE_PROMOTE, []),
    },
    S.PRE_PROMOTE: {
        Tick: (S.PRE_PROMOTE, []),
        PrePromoteDone: (S.WAITING, []),
        RevalidationPassed: (S.PRE_PROMOTE, []),
        LeaseLost: (S.DEMOTING, DEMOTE),
        StopRequested: (S.STOPPING, DEMOTE),
        MasterLeft: (S.PRE_PROMOTE, []),
    },
    S.WAITING: {
        Tick: (S.WAITING, []),
        RevalidationPassed: (S.WAITING, []),  # an ordinary check never promotes
        LeaseLost: (S.DEMOTING, DEMOTE),
        StopRequested: (S.STOPPING, DEMOTE),
        MasterLeft: (S.WAITING, []),
    },
    S.PROMOTING: {
        Tick: (S.PROMOTING, []),
        RevalidationPassed: (S.MASTER, [StartServing]),
        JournalFailed: (S.DEMOTING, DEMOTE),
        LeaseLost: (S.DEMOTING, DEMOTE),
        StopRequested: (S.STOPPING, DEMOTE),
        MasterLeft: (S.PROMOTING, []),
    },
    S.MASTER: {
        Tick: (S.MASTER, []),
        RevalidationPassed: (S.MASTER, []),
        LeaseLost: (S.DEMOTING, DEMOTE),
        ChildExited: (S.MASTER, [RestartChild]),
        StepDownRequested: (S.DEMOTING, DEMOTE),
        ServingFailed: (S.DEMOTING, DEMOTE),
        StopRequested: (S.STOPPING, DEMOTE),
        MasterLeft: (S.MASTER, []),
    },
    S.DEMOTING: {
        Tick: (S.DEMOTING, []),
        ServingStopped: (S.SLAVE, []),
        StopRequested: (S.STOPPING, []),  # serving is already stopping
        JournalOpened: (S.DEMOTING, [CloseJournal]),
        **{overtaken: (S.DEMOTING, []) for overtaken in WHILE_LEAVING},
    },
    S.DEMOTING_WITH_CHILD: {
        Tick: (S.DEMOTING_WITH_CHILD, []),
        ServingStopped: (S.SLAVE, []),
        StopRequested: (S.STOPPING_WITH_CHILD, []),
        RevalidationPassed: (S.DEMOTING_WITH_CHILD, []),
        LeaseLost: (S.DEMOTING, []),  # no more checks: the guardian's deadline runs out
        ChildExited: (S.DEMOTING_WITH_CHILD, []),
        StepDownRequested: (S.DEMOTING_WITH_CHILD, []),
        MasterLeft: (S.DEMOTING_WITH_CHILD, []),
    },
    S.STOPPING: {
        Tick: (S.STOPPING, []),
        ServingStopped: (S.STOPPED, [Exit]),
        JournalOpened: (S.STOPPING, [CloseJournal]),
        **{overtaken: (S.STOPPING, []) for overtaken in (*WHILE_LEAVING, StopRequested)},
    },
    S.STOPPING_WITH_CHILD: {
        Tick: (S.STOPPING_WITH_CHILD, []),
        ServingStopped: (S.STOPPED, [Exit]),
        StopRequested: (S.STOPPING_WITH_CHILD, []),
        RevalidationPassed: (S.STOPPING_WITH_CHILD, []),
        LeaseLost: (S.STOPPING, []),
        ChildExited: (S.STOPPING_WITH_CHILD, []),
        StepDownRequested: (S.STOPPING_WITH_CHILD, []),
        MasterLeft: (S.STOPPING_WITH_CHILD, []),
    },
    S.STOPPED: {
        Tick: (S.STOPPED, []),
        LockResult: (S.STOPPED, []),  # a stop overtook the attempt; the shell releases on exit
        StopRequested: (S.STOPPED, []),
        MasterLeft: (S.STOPPED, []),
    },
}
PAIRS = [(state, kind) for state in State for kind in SAMPLES]


def test_the_samples_cover_every_event_type_and_the_table_every_state() -> None:
    assert set(SAMPLES) == set(get_args(roles.Event))
    assert set(TRANSITIONS) == set(EXPECTED) == set(State)


def test_the_table_accepts_exactly_the_expected_pairs() -> None:
    for state in State:
        assert set(TRANSITIONS[state]) == {*EXPECTED[state], *SETTINGS}, state


@pytest.mark.parametrize(("state", "kind"), PAIRS, ids=[f"{s}-{k.__name__}" for s, k in PAIRS])
def test_each_event_in_each_state(state: State, kind: type) -> None:
    d = reach(state)
    before = copy.deepcopy(vars(d.machine))
    event = SAMPLES[kind]
    actions = d.machine.handle(event, d.now)
    if kind in SETTINGS:
        assert actions == [] and d.machine.state is state
        return
    if kind not in EXPECTED[state]:
        # Refused: nothing changes, and the shell is told, to log it with a code.
        assert actions == [Refused(state, event, f"{kind.__name__} does not fit state {state}")]
        assert vars(d.machine) == before
        return
    to, asked = EXPECTED[state][kind]
    assert (d.machine.state, d.kinds(actions)) == (to, asked)
    # The outside world hears of a move only when the role it is shown changes.
    changes = [a for a in actions if isinstance(a, RoleChanged)]
    if to.role is state.role:
        assert changes == []
    else:
        assert [(c.old, c.new) for c in changes] == [(state.role, to.role)]
        assert actions[0] == changes[0], "the role change comes before what it leads to"


def test_every_takeover_step_is_shown_as_acquired() -> None:
    steps = {s for s in State if s.role is Role.ACQUIRED}
    assert steps == {
        S.CLAIMING,
        S.RECOVERING,
        S.RECOVERING_PRE_PROMOTE,
        S.PRE_PROMOTE,
        S.WAITING,
        S.PROMOTING,
    }
    assert {s.role for s in State} == set(Role)
    assert {str(r) for r in Role} == {
        "starting",
        "slave",
        "acquired",
        "master",
        "demoting",
        "stopping",
        "stopped",
    }


def test_only_a_passed_promoting_check_leads_to_master() -> None:
    leads_to_master = {
        (state, kind)
        for state, row in TRANSITIONS.items()
        for kind, step in row.items()
        if S.MASTER in step.to
    }
    assert leads_to_master == {(S.PROMOTING, RevalidationPassed)}


def test_a_pre_promote_answer_for_an_earlier_takeover_is_refused_with_why() -> None:
    d = reach(S.PRE_PROMOTE)
    stale = PrePromoteDone(2, None)
    before = copy.deepcopy(vars(d.machine))
    [refused] = d.machine.handle(stale, d.now + 0.01)
    assert isinstance(refused, Refused) and refused.event == stale
    assert vars(d.machine) == before
    assert "epoch 2 answered too late" in refused.why
    assert d.machine.state is S.PRE_PROMOTE


def test_the_pre_promote_command_starts_with_the_recovery() -> None:
    d = reach(S.CLAIMING)
    d.machine.has_pre_promote = True
    actions = d.machine.handle(EpochClaimed(3), d.now)
    assert d.kinds(actions) == [RunPrePromote, OpenJournal]


def test_the_columns_say_where_lease_checks_run_and_where_a_hung_one_demotes() -> None:
    checked = {state for state in State if state.checks_lease}
    assert checked == {
        State.PRE_PROMOTE,
        State.WAITING,
        State.PROMOTING,
        State.MASTER,
        State.DEMOTING_WITH_CHILD,  # the exec child's guardian hears the claim holds
        State.STOPPING_WITH_CHILD,
    }
    # Where a check runs on a timer, a Tick starts it: the row has a handler for Tick.
    assert all(TRANSITIONS[state][roles.Tick].handler != "ignore" for state in checked)
    demoting = {state for state in State if state.hung_check_demotes}
    assert demoting == checked - {State.DEMOTING_WITH_CHILD, State.STOPPING_WITH_CHILD}
