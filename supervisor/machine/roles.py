"""The role state machine: events and a clock in, actions out.

Two rules, after h11's state file:
- everything that decides a node's role lives in the table (``role_table.py``)
  and the handlers here that it names;
- this file does no I/O: it does not lock, sleep, read the clock or start
  processes. The shell (``supervisor/shell/node.py``) carries out the returned
  actions and feeds back what happened as events, with the time.

``handle`` looks the event's type up in ``TRANSITIONS[state]``: missing, the
event is refused (``Refused``, which the shell logs with a code); present, the
handler it names runs and may move the machine to one of the states the table
lists for it, and nowhere else. What is left here besides the state is data
the handlers read: timers, the takeover's epoch, the settings the node was told.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Re-exported (pyproject: implicit_reexport): the shell and the tests say ``roles.Tick``.
from primacy.share.records import Role
from primacy.supervisor.machine.role_events import (
    CLAIM_LAPSED_EXIT,
    GUARDIAN_KILL_LEAD,
    LEASE_CHECKS_PER_KEEPALIVE,
    Action,
    ChildExited,
    ClaimEpoch,
    ClaimFailed,
    CloseJournal,
    EpochClaimed,
    Event,
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
    Revalidate,
    RevalidationPassed,
    RoleChanged,
    RunPrePromote,
    ServingFailed,
    ServingStopped,
    StartServing,
    StepDownRequested,
    StopRequested,
    StopServing,
    Tick,
    Timings,
    TimingsChanged,
    TryLock,
    YieldLock,
)
from primacy.supervisor.machine.role_table import (
    IGNORED,
    TRANSITIONS,
    State,
    Step,
    handlers_missing,
)

# The shortest gap between two lock attempts, however many hints arrive.
MIN_RETRY_GAP_S = 0.01


class RoleMachineError(Exception):
    """A handler tried a move its table entry does not allow: a bug in this file."""


class _Refusal(Exception):
    """Raised by a handler, before it changes anything, for an event that fits the state's
    type but not its data (a ``pre_promote`` answer for an earlier takeover)."""


@dataclass
class RoleMachine:
    """Applies TRANSITIONS to events; keeps the timers; returns actions."""

    timings: Timings
    priority: Priority
    state: State = State.STARTING
    epoch: int | None = None
    last_ok_revalidation_start: float | None = None
    best_other_priority: Priority = Priority.NEVER
    paused: bool = False
    has_child: bool = False  # an exec child, whose guardian hears of every lease check
    has_pre_promote: bool = False  # a pre_promote command must allow each takeover
    # Until when a node that failed to start serving (or crash-looped) tries no lock.
    hold_off_until: float = 0.0
    _claim_expires_at: float = float("-inf")
    _io_in_flight: Action | None = None
    _io_started_at: float = 0.0
    _next_lock_attempt_at: float = 0.0
    _last_lock_attempt_at: float = float("-inf")
    _master_left_at: float = float("-inf")
    _first_seen_free_at: float | None = None
    _next_revalidation_at: float = 0.0
    _takeover_ready_at: float = float("inf")
    _child_exits: list[float] = field(default_factory=list)
    _restart_child_when_confirmed: bool = False  # after a claim-lapse kill, on a lapsed claim
    _last_event_at: float = float("-inf")
    _step: Step = IGNORED  # the table entry being applied

    # ---- what the outside may ask ------------------------------------------

    @property
    def role(self) -> Role:
        """The role the outside world is shown (every takeover step is ``acquired``)."""
        return self.state.role

    def is_serving(self, now: float) -> bool:
        """True only for a master whose last passed lease check started under one keepalive ago."""
        return self.role is Role.MASTER and self.claim_expires_at() > now

    @property
    def lock_io_started_at(self) -> float | None:
        """When the lock operation under way started, None if none is."""
        return self._io_started_at if self._io_in_flight is not None else None

    def claim_expires_at(self) -> float:
        """The instant (same clock) after which this node must not claim to be master."""
        if self.role is not Role.MASTER:
            return float("-inf")
        return self._claim_expires_at

    def child_may_live_until(self) -> float:
        """Until when the exec child may run: the claim's end less the guardian's kill lead,
        kept up through a graceful stop."""
        if self.role not in (Role.MASTER, Role.DEMOTING, Role.STOPPING):
            return float("-inf")
        return self._claim_expires_at - GUARDIAN_KILL_LEAD * self.timings.lock_keep_alive_period_s

    def next_deadline(self) -> float:
        """When the shell should next send a Tick, at the latest."""
        deadlines = []
        if self._io_in_flight is not None:
            # Only where an overdue lease check demotes: elsewhere a deadline already past
            # would only make the shell spin until the hung share answers.
            if self.state.hung_check_demotes and not self.paused:
                deadlines.append(self._io_started_at + self._io_timeout())
        elif self.state in (State.STARTING, State.SLAVE):
            deadlines.append(max(self._next_lock_attempt_at, self.hold_off_until))
        elif self.state.checks_lease:
            deadlines.append(self._next_revalidation_at)
            if self.state is State.WAITING:
                deadlines.append(self._takeover_ready_at)
        if self.role is Role.MASTER and self._claim_expires_at > self._last_event_at:
            deadlines.append(self._claim_expires_at)  # once: a lapsed claim is not due again
        return min(deadlines, default=float("inf"))

    # ---- the one entry point -----------------------------------------------

    def handle(self, event: Event, now: float) -> list[Action]:
        """Apply one event at time ``now``; return what the shell must do, in order."""
        step = TRANSITIONS[self.state].get(type(event))
        if step is None:
            why = f"{type(event).__name__} does not fit state {self.state}"
            return [Refused(self.state, event, why)]
        actions: list[Action] = []
        self._step = step
        try:
            getattr(self, "_" + step.handler)(event, now, actions)
        except _Refusal as refusal:
            return [Refused(self.state, event, str(refusal))]
        finally:
            self._step = IGNORED
        self._last_event_at = now
        return actions

    # ---- handlers named by the table, (event, now, actions) each -------------

    def _ignore(self, event: Event, now: float, actions: list[Action]) -> None:
        pass

    def _io_finished(self, event: Event, now: float, actions: list[Action]) -> None:
        """The result of a lock operation a stop or demotion overtook: only the worker is free."""
        self._io_done()

    def _set(
        self, event: PauseChanged | PriorityChanged | PeersSeen, now: float, actions: list[Action]
    ) -> None:
        """What the node is told: the field the table names, replaced."""
        setattr(self, self._step.sets, getattr(event, self._step.sets))

    def _set_timings(self, event: TimingsChanged, now: float, actions: list[Action]) -> None:
        # A shorter keepalive shortens the current claim at once; a longer one only
        # counts for lease checks that start from now on (the shell records it in the
        # epoch file before sending this event).
        start = self.last_ok_revalidation_start
        if start is not None:
            shorter = start + event.timings.lock_keep_alive_period_s
            self._claim_expires_at = min(self._claim_expires_at, shorter)
        self.timings = event.timings

    # ---- slave ---------------------------------------------------------------

    def _tick_slave(self, event: Tick, now: float, actions: list[Action]) -> None:
        if self._io_in_flight is not None:
            return
        if self.priority is Priority.NEVER:
            if self.state is State.STARTING:
                self._move(State.SLAVE, "priority never: will not take the lock", actions)
            return
        if self.paused and self.state is State.SLAVE:
            return  # a paused group keeps its master, whatever happens to it
        if now >= self._next_lock_attempt_at and now >= self.hold_off_until:
            self._last_lock_attempt_at = now
            self._start_io(TryLock(), now, actions)

    def _retry_soon(self, event: MasterLeft, now: float, actions: list[Action]) -> None:
        self._master_left_at = now
        self._next_lock_attempt_at = self._soonest_retry(now)

    def _lock_result(self, event: LockResult, now: float, actions: list[Action]) -> None:
        self._io_done()
        self._next_lock_attempt_at = now + self.timings.lock_acquire_sleep_interval_s
        if self._master_left_at > self._last_lock_attempt_at:
            # The master left while this attempt was under way: it may have seen the
            # lock still held, so look again at once.
            self._next_lock_attempt_at = self._soonest_retry(now)
        if not event.acquired:
            self._first_seen_free_at = None
            self._move(State.SLAVE, "the lock is held by another node", actions)
            return
        if self._first_seen_free_at is None:
            self._first_seen_free_at = now
        below = int(self.best_other_priority) - int(self.priority)
        if now - self._first_seen_free_at < self.timings.priority_delay(below):
            self._move(State.SLAVE, "the lock is free; a higher priority node goes first", actions)
            actions.append(YieldLock())
            return
        self._first_seen_free_at = None
        self._move(State.CLAIMING, "acquired the lock", actions)
        self._start_io(ClaimEpoch(), now, actions)

    # ---- taking over ---------------------------------------------------------

    def _epoch_claimed(self, event: EpochClaimed, now: float, actions: list[Action]) -> None:
        self._io_done()
        self.epoch = event.epoch
        # Earlier claims are waited out unless the claim proved none is left (a handover,
        # or the claimant's process seen ended); recovery, the fence and the pre_promote
        # command run during the wait.
        previous = event.previous_keep_alive_period_s
        wait = 0.0 if event.nothing_to_outlast else self.timings.takeover_wait(previous)
        self._takeover_ready_at = now + wait
        self._next_revalidation_at = now + self.timings.lock_keep_alive_period_s
        reason = f"claimed epoch {event.epoch}"
        if self.has_pre_promote:
            self._move(State.RECOVERING_PRE_PROMOTE, reason, actions)
            actions.append(RunPrePromote(event.epoch))
        else:
            self._move(State.RECOVERING, reason, actions)
        self._start_io(OpenJournal(event.epoch), now, actions)

    def _journal_opened(self, event: JournalOpened, now: float, actions: list[Action]) -> None:
        self._io_done()
        self._move(self._onward(), "journal recovered and fenced", actions)

    def _close_journal(self, event: JournalOpened, now: float, actions: list[Action]) -> None:
        self._io_done()
        actions.append(CloseJournal())

    def _pre_promote_done(self, event: PrePromoteDone, now: float, actions: list[Action]) -> None:
        if event.epoch != self.epoch:
            raise _Refusal(f"the pre_promote command of epoch {event.epoch} answered too late")
        if event.vetoed_because is not None:
            self._hold_off_and_step_down(event.vetoed_because, now, actions)
            return
        self._move(self._onward(), "pre_promote allowed the takeover", actions)

    def _tick_waiting(self, event: Tick, now: float, actions: list[Action]) -> None:
        if self._io_in_flight is not None:
            self._demote_if_hung(now, actions)
        elif now >= self._takeover_ready_at:
            # Promotion needs a lease check that started after the wait: the shell runs it
            # as the journal's commit of the tenure record.
            self._move(State.PROMOTING, "takeover wait over", actions)
            self._start_io(Revalidate(promotion=True), now, actions)
        elif now >= self._next_revalidation_at:
            self._start_io(Revalidate(), now, actions)

    def _promote(self, event: RevalidationPassed, now: float, actions: list[Action]) -> None:
        self._io_done()
        self._record_check(event.started_at)
        if event.started_at < self._takeover_ready_at:
            # Cannot happen (the check starts after the wait); if it did, the check
            # proves nothing about the wait, so wait for one that does.
            self._move(State.WAITING, "the promoting check started before the wait ended", actions)
            return
        assert self.epoch is not None
        self._move(State.MASTER, "takeover wait over, lease confirmed", actions)
        actions.append(StartServing(self.epoch))

    # ---- holding the lease -----------------------------------------------------

    def _tick_keepalive(self, event: Tick, now: float, actions: list[Action]) -> None:
        if self._io_in_flight is not None:
            self._demote_if_hung(now, actions)
        elif now >= self._next_revalidation_at:
            self._start_io(Revalidate(), now, actions)

    def _tick_confirming(self, event: Tick, now: float, actions: list[Action]) -> None:
        # Through a graceful stop, so the exec child's guardian keeps hearing that the
        # claim holds while the child shuts down (supervisor/child/guardian.py).
        if self._io_in_flight is None and now >= self._next_revalidation_at:
            self._start_io(Revalidate(), now, actions)

    def _revalidated(self, event: RevalidationPassed, now: float, actions: list[Action]) -> None:
        self._io_done()
        self._record_check(event.started_at)
        if self._restart_child_when_confirmed and self.state is State.MASTER:
            self._restart_child_when_confirmed = False
            actions.append(RestartChild())

    def _lose_lease(self, event: LeaseLost, now: float, actions: list[Action]) -> None:
        self._io_done()
        self._demote(State.DEMOTING, event.reason, graceful=False, actions=actions)

    def _stop_confirming(self, event: LeaseLost, now: float, actions: list[Action]) -> None:
        """The guardian hears of no more checks: its deadline runs out and it kills the tree."""
        self._io_done()
        self._move(self._onward(), event.reason, actions)

    def _child_exited(self, event: ChildExited, now: float, actions: list[Action]) -> None:
        if event.returncode == CLAIM_LAPSED_EXIT:  # the node's own safety action, not a crash
            # (docs/safety.md): not counted; restarted once a claim is live to start it on
            self._restart_child_when_confirmed = self.child_may_live_until() <= now
            actions += [] if self._restart_child_when_confirmed else [RestartChild()]
            return
        window = self.timings.child_restart_window_s
        self._child_exits = [t for t in (*self._child_exits, now) if now - t <= window]
        if len(self._child_exits) > self.timings.child_max_restarts and not self.paused:
            self._child_exits.clear()
            why = (
                f"the child keeps exiting (last code {event.returncode}); "
                "giving the lock up for another"
            )
            self._hold_off_and_step_down(why, now, actions)
            return
        actions.append(RestartChild())

    def _step_down(self, event: StepDownRequested, now: float, actions: list[Action]) -> None:
        self._step_down_gracefully(event.reason, actions)

    def _give_up(
        self, event: ClaimFailed | JournalFailed | ServingFailed, now: float, actions: list[Action]
    ) -> None:
        """A failed start: step down gracefully and take no lock for a while."""
        reason = event.reason
        if isinstance(event, JournalFailed):
            reason = f"the journal failed before this node served: {reason}"
        if not isinstance(event, ServingFailed):
            self._io_done()  # the claim, the recovery or the promoting check has ended
        self._hold_off_and_step_down(reason, now, actions)

    # ---- leaving -------------------------------------------------------------

    def _stop_serving(self, event: StopRequested, now: float, actions: list[Action]) -> None:
        child = self.state is State.MASTER and self.has_child
        self._move(State.STOPPING_WITH_CHILD if child else State.STOPPING, event.reason, actions)
        actions.append(StopServing(graceful=True, reason=event.reason))

    def _keep_stopping(self, event: StopRequested, now: float, actions: list[Action]) -> None:
        self._move(self._onward(), event.reason, actions)  # with the child, if it stops one

    def _serving_stopped(self, event: ServingStopped, now: float, actions: list[Action]) -> None:
        self._move(State.SLAVE, "serving stopped", actions)
        self.epoch = None
        self.last_ok_revalidation_start = None
        self._restart_child_when_confirmed = False
        self._claim_expires_at = float("-inf")
        self._takeover_ready_at = float("inf")
        self._next_lock_attempt_at = now + self.timings.lock_acquire_sleep_interval_s

    def _exit(
        self, event: StopRequested | ServingStopped, now: float, actions: list[Action]
    ) -> None:
        reason = event.reason if isinstance(event, StopRequested) else "serving stopped"
        self._move(State.STOPPED, reason, actions)
        actions.append(Exit())

    # ---- helpers -------------------------------------------------------------

    def _move(self, to: State, reason: str, actions: list[Action]) -> None:
        """Enter ``to``, which the table entry being applied must list (staying needs no
        entry); tell the shell when the role the outside sees changes."""
        if to is self.state:
            return
        if to not in self._step.to:
            raise RoleMachineError(f"{self._step.handler} may not lead from {self.state} to {to}")
        old, self.state = self.state, to
        if to.role is not old.role:
            actions.append(RoleChanged(old.role, to.role, self.epoch, reason))

    def _onward(self) -> State:
        """Where the event leads when it goes as planned: the table's first target for it."""
        return self._step.to[0]

    def _record_check(self, started_at: float) -> None:
        self.last_ok_revalidation_start = started_at
        self._claim_expires_at = started_at + self.timings.lock_keep_alive_period_s
        interval = self.timings.lock_keep_alive_period_s / LEASE_CHECKS_PER_KEEPALIVE
        self._next_revalidation_at = started_at + interval

    def _demote_if_hung(self, now: float, actions: list[Action]) -> None:
        # Paused, a slow lease check only lets the claim lapse (503); a check that
        # fails still demotes.
        if now - self._io_started_at >= self._io_timeout() and not self.paused:
            why = "the lease check did not finish within the keepalive period (hung share?)"
            self._demote(State.DEMOTING, why, graceful=False, actions=actions)

    def _hold_off_and_step_down(self, reason: str, now: float, actions: list[Action]) -> None:
        self.hold_off_until = now + self.timings.crash_loop_hold_off_s
        self._step_down_gracefully(reason, actions)

    def _step_down_gracefully(self, reason: str, actions: list[Action]) -> None:
        # Only a master has an exec child whose guardian must keep hearing of lease checks.
        child = self.state is State.MASTER and self.has_child
        to = State.DEMOTING_WITH_CHILD if child else State.DEMOTING
        self._demote(to, reason, graceful=True, actions=actions)

    def _demote(self, to: State, reason: str, *, graceful: bool, actions: list[Action]) -> None:
        self._takeover_ready_at = float("inf")
        self._move(to, reason, actions)
        actions.append(StopServing(graceful=graceful, reason=reason))

    def _start_io(self, action: Action, now: float, actions: list[Action]) -> None:
        self._io_in_flight = action
        self._io_started_at = now
        actions.append(action)

    def _io_done(self) -> None:
        self._io_in_flight = None

    def _io_timeout(self) -> float:
        # A lock attempt or claim may take as long as the share needs; a lease
        # check that outlives the keepalive period means the share is sick.
        if isinstance(self._io_in_flight, Revalidate):
            return self.timings.lock_keep_alive_period_s
        return float("inf")

    def _soonest_retry(self, now: float) -> float:
        # Hints can come in bursts (and from this node's own closes of the lock
        # file): never try more often than every MIN_RETRY_GAP_S.
        return max(now, self._last_lock_attempt_at + MIN_RETRY_GAP_S)


if _missing := handlers_missing(RoleMachine):  # a typo in the table fails at import
    raise RoleMachineError(f"the table names handlers RoleMachine lacks: {_missing}")
