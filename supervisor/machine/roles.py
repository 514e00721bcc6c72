"""The role state machine: events and a clock in, actions out.

Two rules, after h11's state file:
- everything that decides a node's role lives in the table (``role_table.py``)
  and the handlers here that it names;
- this file does no I/O: it does not lock, sleep, read the clock or start
  processes. The shell (``supervisor/shell/node.py``) carries out the returned
  actions and feeds back what happened as events, with the time.

The handlers are split by concern: the slave's and the takeover's are here, the
master's and the leaving ones in ``role_master.py``; the data they share, what
the outside may ask and the moves every handler makes are in ``role_core.py``.

``handle`` looks the event's type up in ``TRANSITIONS[state]``: missing, the
event is refused (``Refused``, which the shell logs with a code); present, the
handler it names runs and may move the machine to one of the states the table
lists for it, and nowhere else. What is left here besides the state is data
the handlers read: timers, the takeover's epoch, the settings the node was told.
"""

from __future__ import annotations

from dataclasses import dataclass

# Re-exported (pyproject: implicit_reexport, and ruff's F401 off for this file): the shell and
# the tests say ``roles.Tick``, also for what only role_master.py and role_core.py use now.
from primacy.share.records import Role
from primacy.supervisor.machine.role_core import RoleMachineError
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
from primacy.supervisor.machine.role_master import MasterSteps
from primacy.supervisor.machine.role_table import (
    IGNORED,
    TRANSITIONS,
    State,
    handlers_missing,
)

# The shortest gap between two lock attempts, however many hints arrive.
MIN_RETRY_GAP_S = 0.01


class _Refusal(Exception):
    """Raised by a handler, before it changes anything, for an event that fits the state's
    type but not its data (a ``pre_promote`` answer for an earlier takeover)."""


@dataclass
class RoleMachine(MasterSteps):
    """Applies TRANSITIONS to events; keeps the timers; returns actions."""

    # ---- the one entry point -----------------------------------------------

    def handle(self, event: Event, now: float) -> list[Action]:
        """Apply one event at time ``now``; return what the shell must do, in order."""
        step = TRANSITIONS[self.state].get(type(event))
        if step is None:
            why = f"{type(event).__name__} does not fit state {self.state}"
            return [Refused(self.state, event, why)]
        actions: list[Action] = []
        if isinstance(event, Tick):  # a running total: a Tick that does not measure it is 0
            self._collecting_s = max(self._collecting_s, event.collecting_s)
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

    # ---- helpers -------------------------------------------------------------

    def _soonest_retry(self, now: float) -> float:
        # Hints can come in bursts (and from this node's own closes of the lock
        # file): never try more often than every MIN_RETRY_GAP_S.
        return max(now, self._last_lock_attempt_at + MIN_RETRY_GAP_S)


if _missing := handlers_missing(RoleMachine):  # a typo in the table fails at import
    raise RoleMachineError(f"the table names handlers RoleMachine lacks: {_missing}")
