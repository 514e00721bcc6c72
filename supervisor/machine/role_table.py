"""The whole policy for roles: the states, and what each event type does in each of them.

Read it as h11's state table: ``TRANSITIONS[state][event type]`` names the
``RoleMachine`` method (``roles.py``) that carries the event out and the states
it may lead to. Two rules keep it the whole policy:

- an event type missing from a state's row does not fit that state: the
  machine changes nothing and returns ``Refused``, which the shell logs with
  ``codes.EVENT_REFUSED``; nothing is dropped silently;
- an event that may arrive in a state and must change nothing there (a lock
  result after a stop, a hint meant for slaves) is listed as ``IGNORED``,
  staying put by design.

A takeover's steps are states of their own (claiming, recovering with or
without a ``pre_promote`` command running, waiting out the takeover wait,
promoting), and so is a graceful stop during which the exec child's guardian
keeps hearing that the claim holds. The outside world sees only ``Role``
(``State.role``): every takeover step is ``acquired``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from primacy.share.records import Role
from primacy.supervisor.machine.role_events import (
    ChildExited,
    ClaimFailed,
    EpochClaimed,
    JournalFailed,
    JournalOpened,
    LeaseLost,
    LockResult,
    MasterLeft,
    PauseChanged,
    PeersSeen,
    PrePromoteDone,
    PriorityChanged,
    RevalidationPassed,
    ServingFailed,
    ServingStopped,
    StepDownRequested,
    StopRequested,
    Tick,
    TimingsChanged,
)


class State(enum.StrEnum):
    STARTING = "starting"
    SLAVE = "slave"
    CLAIMING = "claiming"  # the lock is ours; claiming the next epoch
    RECOVERING = "recovering"  # the epoch is ours; recovering and fencing the journal
    RECOVERING_PRE_PROMOTE = "recovering_pre_promote"  # ... while pre_promote runs
    PRE_PROMOTE = "pre_promote"  # the journal is open; pre_promote has not answered
    WAITING = "waiting"  # the journal is open; waiting out earlier claims
    PROMOTING = "promoting"  # the tenure record's commit: the lease check that promotes
    MASTER = "master"
    DEMOTING = "demoting"  # connectors and children stopping, then the lock let go
    DEMOTING_WITH_CHILD = "demoting_with_child"  # ... lease checks go on for the guardian
    STOPPING = "stopping"
    STOPPING_WITH_CHILD = "stopping_with_child"
    STOPPED = "stopped"

    @property
    def role(self) -> Role:
        """What ``/status``, ``/master``, the registry, systemd and the journal are told."""
        return COLUMNS[self].role

    @property
    def checks_lease(self) -> bool:
        """Lease checks run on a timer in this state."""
        return COLUMNS[self].checks_lease

    @property
    def hung_check_demotes(self) -> bool:
        """A lease check that outlives the keepalive period demotes the node."""
        return COLUMNS[self].hung_check_demotes


@dataclass(frozen=True)
class Columns:
    """What a state is, beside its row of transitions."""

    role: Role
    checks_lease: bool = False
    hung_check_demotes: bool = False


_ACQUIRED = Columns(Role.ACQUIRED)
_CHECKED = Columns(Role.ACQUIRED, checks_lease=True, hung_check_demotes=True)
COLUMNS = {
    State.STARTING: Columns(Role.STARTING),
    State.SLAVE: Columns(Role.SLAVE),
    State.CLAIMING: _ACQUIRED,
    State.RECOVERING: _ACQUIRED,
    State.RECOVERING_PRE_PROMOTE: _ACQUIRED,
    State.PRE_PROMOTE: _CHECKED,
    State.WAITING: _CHECKED,
    State.PROMOTING: _CHECKED,
    State.MASTER: Columns(Role.MASTER, checks_lease=True, hung_check_demotes=True),
    State.DEMOTING: Columns(Role.DEMOTING),
    # ... lease checks go on while the exec child stops, so its guardian hears the claim holds
    State.DEMOTING_WITH_CHILD: Columns(Role.DEMOTING, checks_lease=True),
    State.STOPPING: Columns(Role.STOPPING),
    State.STOPPING_WITH_CHILD: Columns(Role.STOPPING, checks_lease=True),
    State.STOPPED: Columns(Role.STOPPED),
}


@dataclass(frozen=True)
class Step:
    """``handler``: the ``RoleMachine`` method run for the event; it may move the machine to
    one of ``to`` only. Where the event leads one way when it goes as planned (a journal
    opened, a stop that keeps its exec child), that way is ``to[0]``: the table, not the
    handler, says which."""

    handler: str
    to: tuple[State, ...] = ()
    sets: str = ""  # for ``set``: the machine's field the event's field of that name replaces


def go(handler: str, *to: State) -> Step:
    return Step(handler, to)


def handlers_missing(machine: type) -> list[str]:
    """The handlers the table names that ``machine`` lacks (a typo fails at import)."""
    names = {step.handler for row in TRANSITIONS.values() for step in row.values()}
    return sorted(name for name in names if not callable(getattr(machine, "_" + name, None)))


IGNORED = Step("ignore")  # fits the state by design and changes nothing

S = State
LOSE_LEASE = go("lose_lease", S.DEMOTING)
GIVE_UP = go("give_up", S.DEMOTING)  # a failed start: graceful, then hold off
STOP_BEFORE_SERVING = go("stop_serving", S.STOPPING)
# The result of a lock operation a stop or demotion overtook: it frees the lock I/O
# worker and lets nothing go further (the release job queued behind it lets the lock go).
OVERTAKEN = go("io_finished")

# Changes of what the node is told, taken in every state.
SETTINGS: dict[type, Step] = {
    PauseChanged: Step("set", sets="paused"),
    PriorityChanged: Step("set", sets="priority"),
    TimingsChanged: go("set_timings"),
    PeersSeen: Step("set", sets="best_other_priority"),
}

TRANSITIONS: dict[State, dict[type, Step]] = {
    S.STARTING: {
        Tick: go("tick_slave", S.SLAVE),  # priority never: a slave at once
        LockResult: go("lock_result", S.SLAVE, S.CLAIMING),
        MasterLeft: go("retry_soon"),
        StopRequested: go("exit", S.STOPPED),
    },
    S.SLAVE: {
        Tick: go("tick_slave"),
        LockResult: go("lock_result", S.CLAIMING),
        MasterLeft: go("retry_soon"),
        StopRequested: go("exit", S.STOPPED),
        # A lease check a graceful stop with an exec child queued behind the release:
        # it ends after the lock is let go, and no lock is tried until it has.
        RevalidationPassed: OVERTAKEN,
        LeaseLost: OVERTAKEN,
    },
    S.CLAIMING: {
        Tick: IGNORED,  # a claim takes as long as the share needs
        EpochClaimed: go("epoch_claimed", S.RECOVERING, S.RECOVERING_PRE_PROMOTE),
        ClaimFailed: GIVE_UP,
        LeaseLost: LOSE_LEASE,
        StopRequested: STOP_BEFORE_SERVING,
        MasterLeft: IGNORED,  # a hint for slaves (and this node's own closes of the lock)
    },
    S.RECOVERING: {
        Tick: IGNORED,  # recovery takes as long as the journal needs
        JournalOpened: go("journal_opened", S.WAITING),
        JournalFailed: GIVE_UP,
        LeaseLost: LOSE_LEASE,
        StopRequested: STOP_BEFORE_SERVING,
        MasterLeft: IGNORED,
    },
    S.RECOVERING_PRE_PROMOTE: {
        Tick: IGNORED,
        JournalOpened: go("journal_opened", S.PRE_PROMOTE),
        JournalFailed: GIVE_UP,
        PrePromoteDone: go("pre_promote_done", S.RECOVERING, S.DEMOTING),
        LeaseLost: LOSE_LEASE,
        StopRequested: STOP_BEFORE_SERVING,
        MasterLeft: IGNORED,
    },
    S.PRE_PROMOTE: {
        Tick: go("tick_keepalive", S.DEMOTING),
        PrePromoteDone: go("pre_promote_done", S.WAITING, S.DEMOTING),
        RevalidationPassed: go("revalidated"),
        LeaseLost: LOSE_LEASE,
        StopRequested: STOP_BEFORE_SERVING,
        MasterLeft: IGNORED,
    },
    S.WAITING: {
        Tick: go("tick_waiting", S.PROMOTING, S.DEMOTING),
        RevalidationPassed: go("revalidated"),  # keeps the lease checked; never promotes
        LeaseLost: LOSE_LEASE,
        StopRequested: STOP_BEFORE_SERVING,
        MasterLeft: IGNORED,
    },
    S.PROMOTING: {
        Tick: go("tick_keepalive", S.DEMOTING),  # a hung promotion check demotes
        RevalidationPassed: go("promote", S.MASTER, S.WAITING),
        JournalFailed: GIVE_UP,  # the tenure record was not journaled
        LeaseLost: LOSE_LEASE,
        StopRequested: STOP_BEFORE_SERVING,
        MasterLeft: IGNORED,
    },
    S.MASTER: {
        Tick: go("tick_keepalive", S.DEMOTING),
        RevalidationPassed: go("revalidated"),
        LeaseLost: LOSE_LEASE,
        ChildExited: go("child_exited", S.DEMOTING, S.DEMOTING_WITH_CHILD),
        StepDownRequested: go("step_down", S.DEMOTING, S.DEMOTING_WITH_CHILD),
        ServingFailed: go("give_up", S.DEMOTING, S.DEMOTING_WITH_CHILD),
        StopRequested: go("stop_serving", S.STOPPING, S.STOPPING_WITH_CHILD),
        MasterLeft: IGNORED,
    },
    S.DEMOTING: {
        Tick: IGNORED,
        ServingStopped: go("serving_stopped", S.SLAVE),
        StopRequested: go("keep_stopping", S.STOPPING),
        EpochClaimed: OVERTAKEN,
        ClaimFailed: OVERTAKEN,
        JournalOpened: go("close_journal"),
        JournalFailed: OVERTAKEN,
        PrePromoteDone: IGNORED,  # the takeover it vetted was abandoned
        RevalidationPassed: OVERTAKEN,  # a check under way when the demotion began
        LeaseLost: OVERTAKEN,  # already demoting
        ChildExited: IGNORED,  # the child is being stopped
        StepDownRequested: IGNORED,  # already stepping down
        MasterLeft: IGNORED,
    },
    S.DEMOTING_WITH_CHILD: {
        Tick: go("tick_confirming"),
        ServingStopped: go("serving_stopped", S.SLAVE),
        StopRequested: go("keep_stopping", S.STOPPING_WITH_CHILD),
        RevalidationPassed: go("revalidated"),  # the guardian hears the claim still holds
        LeaseLost: go("stop_confirming", S.DEMOTING),  # its deadline runs out
        ChildExited: IGNORED,
        StepDownRequested: IGNORED,
        MasterLeft: IGNORED,
    },
    S.STOPPING: {
        Tick: IGNORED,
        ServingStopped: go("exit", S.STOPPED),
        StopRequested: IGNORED,  # a second signal
        EpochClaimed: OVERTAKEN,
        ClaimFailed: OVERTAKEN,
        JournalOpened: go("close_journal"),
        JournalFailed: OVERTAKEN,
        PrePromoteDone: IGNORED,  # the takeover it vetted was abandoned
        RevalidationPassed: OVERTAKEN,
        LeaseLost: OVERTAKEN,
        ChildExited: IGNORED,
        StepDownRequested: IGNORED,
        MasterLeft: IGNORED,
    },
    S.STOPPING_WITH_CHILD: {
        Tick: go("tick_confirming"),
        ServingStopped: go("exit", S.STOPPED),
        StopRequested: IGNORED,
        RevalidationPassed: go("revalidated"),
        LeaseLost: go("stop_confirming", S.STOPPING),
        ChildExited: IGNORED,
        StepDownRequested: IGNORED,
        MasterLeft: IGNORED,
    },
    S.STOPPED: {
        Tick: IGNORED,
        LockResult: OVERTAKEN,  # a stop overtook the attempt; the shell releases on exit
        StopRequested: IGNORED,
        MasterLeft: IGNORED,
    },
}
for _row in TRANSITIONS.values():
    _row.update(SETTINGS)
del S, _row
