"""Drives the role machine with events and a fake clock, as the shell does: no sleeps, no I/O.

Shared by the ``test_roles*.py`` files: ``Driver`` feeds events at chosen times,
``reach`` brings a machine into any state of the table through real events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from primacy.supervisor.machine import roles
from primacy.supervisor.machine.roles import (
    EpochClaimed,
    JournalOpened,
    LeaseLost,
    LockResult,
    Priority,
    RevalidationPassed,
    RoleChanged,
    RoleMachine,
    State,
    StepDownRequested,
    StopRequested,
    Tick,
    Timings,
)

if TYPE_CHECKING:
    from primacy.store.journal import JournalStore

TICK = Tick()
TIMINGS = Timings(
    lock_acquire_sleep_interval_s=0.1,
    lock_keep_alive_period_s=0.25,
    takeover_delay_s=0.275,
    child_max_restarts=2,
    child_restart_window_s=60.0,
    crash_loop_hold_off_s=5.0,
)
# The role machine only hands the journal on; it never touches it.
STORE = cast("JournalStore", object())


def opened() -> JournalOpened:
    return JournalOpened(STORE)


def passed(started_at: float) -> RevalidationPassed:
    """A lease check that started at ``started_at`` passed."""
    return RevalidationPassed(started_at, duration_s=0.001, finished_unix_s=0.0)


class Driver:
    """Feeds events at chosen times and remembers the actions."""

    def __init__(
        self,
        priority: Priority = Priority.NORMAL,
        *,
        has_child: bool = False,
        has_pre_promote: bool = False,
    ) -> None:
        self.machine = RoleMachine(
            TIMINGS, priority, has_child=has_child, has_pre_promote=has_pre_promote
        )
        self.now = 0.0

    def at(self, when: float, event: roles.Event = TICK) -> list[roles.Action]:
        """Like the shell: the event, then a tick so due timers fire."""
        self.now = when
        actions = self.machine.handle(event, when)
        if not isinstance(event, Tick):
            actions += self.machine.handle(Tick(), when)
        return actions

    def only(self, when: float, event: roles.Event) -> list[roles.Action]:
        """The event alone, without the tick after it."""
        self.now = when
        return self.machine.handle(event, when)

    @staticmethod
    def kinds(actions: list[roles.Action]) -> list[type]:
        return [type(action) for action in actions if not isinstance(action, RoleChanged)]

    def claimed(self, epoch: int = 3, **terms: object) -> list[roles.Action]:
        """Lock at 0.01, epoch claimed at 0.02 (the takeover wait ends at 0.295)."""
        self.at(0.0)
        self.at(0.01, LockResult(True))
        return self.at(0.02, EpochClaimed(epoch, **terms))  # type: ignore[arg-type]

    def become_master(self) -> None:
        """Master at 0.301, its last lease check started at 0.3."""
        self.claimed()
        self.at(0.03, opened())
        if self.machine.has_pre_promote:
            self.at(0.03, roles.PrePromoteDone(3, None))
        assert self.machine.state is State.WAITING
        assert self.at(0.3) == [roles.Revalidate(promotion=True)]
        assert roles.StartServing(3) in self.at(0.301, passed(0.3))
        assert self.machine.state is State.MASTER


def reach(state: State) -> Driver:
    """A machine brought into ``state`` by real events; ``now`` is when it got there."""
    child = state in (State.DEMOTING_WITH_CHILD, State.STOPPING_WITH_CHILD)
    vetting = state in (State.RECOVERING_PRE_PROMOTE, State.PRE_PROMOTE)
    d = Driver(has_child=child, has_pre_promote=vetting)
    # Each step of a takeover, and the state it leads to.
    path: list[tuple[float, roles.Event, State]] = [
        (0.0, TICK, State.STARTING),  # the lock attempt is under way
        (0.01, LockResult(True), State.CLAIMING),
        (0.02, EpochClaimed(3), State.RECOVERING_PRE_PROMOTE if vetting else State.RECOVERING),
        (0.03, opened(), State.PRE_PROMOTE if vetting else State.WAITING),
        (0.3, TICK, State.PROMOTING),
        (0.301, passed(0.3), State.MASTER),
    ]
    if state in (State.SLAVE, State.STOPPED):
        path[1:] = [(0.01, LockResult(False), State.SLAVE)]
    leave: dict[State, roles.Event] = {
        State.STOPPED: StopRequested(),
        State.DEMOTING: LeaseLost("lock file replaced"),
        State.DEMOTING_WITH_CHILD: StepDownRequested(),
        State.STOPPING: StopRequested(),
        State.STOPPING_WITH_CHILD: StopRequested(),
    }
    if state in leave:
        path.append((path[-1][0], leave[state], state))
    for when, event, then in path:
        if d.machine.state is state:
            break
        d.only(when, event)
        assert d.machine.state is then, f"{event!r} led to {d.machine.state}, not {then}"
    assert d.machine.state is state
    return d
