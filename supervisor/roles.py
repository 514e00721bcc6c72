"""The role state machine: events and a clock in, actions out.

Two rules, after h11's state file:
- everything that decides a node's role lives in this file;
- this file does no I/O: it does not lock, sleep, read the clock or start
  processes. The shell (``supervisor/node.py``) carries out the returned
  actions and feeds back what happened as events, with the time.

``TRANSITIONS`` (``role_table.py``) is the whole policy for roles: for each
role, the triggers it accepts and the role each leads to. A trigger not in the
table for the current role is a bug in the shell and raises ``RoleMachineError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Re-exported (pyproject: implicit_reexport): the shell and the tests say ``roles.Tick``.
from primacy.supervisor.role_events import (
    GUARDIAN_KILL_LEAD,
    Action,
    ChildExited,
    ClaimEpoch,
    ClaimFailed,
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
    RestartChild,
    Revalidate,
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
    Timings,
    TimingsChanged,
    TryLock,
    YieldLock,
)
from primacy.supervisor.role_table import TRANSITIONS

# The shortest gap between two lock attempts, however many hints arrive.
MIN_RETRY_GAP_S = 0.01


class RoleMachineError(Exception):
    """The shell fed an event the current role does not accept."""


@dataclass
class RoleMachine:
    """Applies TRANSITIONS to events; keeps the timers; returns actions."""

    timings: Timings
    priority: Priority
    role: Role = Role.STARTING
    epoch: int | None = None
    since: float = 0.0
    last_ok_revalidation_start: float | None = None
    best_other_priority: Priority = Priority.NEVER
    paused: bool = False
    has_child: bool = False  # an exec child, whose guardian hears of every lease check
    has_pre_promote: bool = False  # a pre_promote command must allow each takeover
    _claim_expires_at: float = float("-inf")
    _io_in_flight: Action | None = None
    _io_started_at: float = 0.0
    _next_lock_attempt_at: float = 0.0
    _retry_after_attempt: bool = False
    _last_lock_attempt_at: float = float("-inf")
    _first_seen_free_at: float | None = None
    _next_revalidation_at: float = 0.0
    _takeover_ready_at: float | None = None
    _journal_open: bool = False
    _pre_promote_passed: bool = False
    # Lease checks go on through a graceful stop, so the exec child's guardian keeps hearing
    # that the claim holds while the child shuts down (supervisor/guardian.py).
    _confirming_while_stopping: bool = False
    # Until when a node that failed to start serving (or crash-looped) tries no lock.
    hold_off_until: float = 0.0
    _child_exits: list[float] = field(default_factory=list)

    # ---- what the outside may ask ------------------------------------------

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
            deadlines.append(self._io_started_at + self._io_timeout())
        elif self.role in (Role.STARTING, Role.SLAVE):
            deadlines.append(max(self._next_lock_attempt_at, self.hold_off_until))
        elif self.role in (Role.ACQUIRED, Role.MASTER) or self._confirming_while_stopping:
            deadlines.append(self._next_revalidation_at)
            if self._takeover_ready_at is not None:
                deadlines.append(self._takeover_ready_at)
        if self.role is Role.MASTER:
            deadlines.append(self.claim_expires_at())
        return min(deadlines, default=float("inf"))

    # ---- the one entry point -----------------------------------------------

    def handle(self, event: Event, now: float) -> list[Action]:
        """Apply one event at time ``now``; return what the shell must do, in order."""
        actions: list[Action] = []
        match event:
            case Tick():
                self._on_tick(now, actions)
            case LockResult(acquired=acquired):
                self._io_done()
                self._on_lock_result(acquired, now, actions)
            case EpochClaimed(
                epoch=epoch,
                previous_keep_alive_period_s=previous,
                nothing_to_outlast=nothing_to_outlast,
            ):
                self._io_done()
                self.epoch = epoch
                self._apply("epoch_claimed", now, actions, f"claimed epoch {epoch}")
                wait = 0.0 if nothing_to_outlast else self.timings.takeover_wait(previous)
                self._takeover_ready_at = now + wait
                self._next_revalidation_at = now + self.timings.lock_keep_alive_period_s
                # Recovery, the fence and the pre_promote command run during the takeover wait.
                self._journal_open = False
                self._pre_promote_passed = not self.has_pre_promote
                if self.has_pre_promote:
                    actions.append(RunPrePromote(epoch))
                self._start_io(OpenJournal(epoch), now, actions)
            case PrePromoteDone(epoch=epoch, vetoed_because=veto):
                # Only this takeover's command counts; an earlier one's ended too late.
                if self.role is Role.ACQUIRED and epoch == self.epoch:
                    self._on_pre_promote(veto, now, actions)
            case JournalOpened():
                self._io_done()
                if self.role is Role.ACQUIRED:
                    self._journal_open = True
                    self._apply("journal_opened", now, actions, "journal recovered and fenced")
            case JournalFailed(reason=reason):
                self._io_done()
                if self.role is Role.ACQUIRED:
                    why = f"the journal failed before this node served: {reason}"
                    self._give_up(now, actions, why, "journal_failed")
            case ClaimFailed(reason=reason):
                self._io_done()
                if self.role is Role.ACQUIRED:
                    self._give_up(now, actions, reason, "claim_failed")
            case RevalidationPassed(started_at=started_at):
                self._io_done()
                self._on_revalidated(started_at, now, actions)
            case LeaseLost(reason=reason):
                self._io_done()
                self._confirming_while_stopping = False  # the guardian's deadline runs out
                if self.role in (Role.ACQUIRED, Role.MASTER):
                    self._demote(now, actions, reason, graceful=False, trigger="lease_lost")
            case ChildExited(returncode=code):
                self._on_child_exit(code, now, actions)
            case ServingStopped():
                self._confirming_while_stopping = False
                self._apply("serving_stopped", now, actions, "serving stopped")
                self._after_role_entry(now, actions)
            case StopRequested(reason=reason):
                self._on_stop(reason, now, actions)
            case StepDownRequested(reason=reason):
                if self.role is Role.MASTER:
                    self._demote(now, actions, reason, graceful=True, trigger="step_down")
            case ServingFailed(reason=reason):
                if self.role is Role.MASTER:
                    self._give_up(now, actions, reason, "step_down")
            case MasterLeft():
                if self.role in (Role.STARTING, Role.SLAVE):
                    if self._io_in_flight is not None:
                        self._retry_after_attempt = True
                    self._next_lock_attempt_at = self._soonest_retry(now)
            case PauseChanged(paused=paused):
                self.paused = paused
            case PriorityChanged(priority=priority):
                self.priority = priority
            case TimingsChanged(timings=timings):
                # A shorter keepalive shortens the current claim at once; a longer
                # one only counts for lease checks that start from now on (the
                # shell records it in the epoch file before sending this event).
                start = self.last_ok_revalidation_start
                if start is not None:
                    shorter = start + timings.lock_keep_alive_period_s
                    self._claim_expires_at = min(self._claim_expires_at, shorter)
                self.timings = timings
            case PeersSeen(best_other_priority=best):
                self.best_other_priority = best
        return actions

    # ---- event handlers ----------------------------------------------------

    def _on_tick(self, now: float, actions: list[Action]) -> None:
        if self._io_in_flight is not None:
            # Paused, a slow lease check only lets the claim lapse (503); a
            # check that fails still demotes.
            if (
                now - self._io_started_at >= self._io_timeout()
                and self.role in (Role.ACQUIRED, Role.MASTER)
                and not self.paused
            ):
                self._demote(
                    now,
                    actions,
                    "the lease check did not finish within the keepalive period (hung share?)",
                    graceful=False,
                    trigger="lease_lost",
                )
            return
        if self.role in (Role.STARTING, Role.SLAVE):
            if self.priority is Priority.NEVER:
                if self.role is Role.STARTING:
                    self._apply(
                        "not_eligible", now, actions, "priority never: will not take the lock"
                    )
                return
            if self.paused and self.role is Role.SLAVE:
                return  # a paused group keeps its master, whatever happens to it
            if now >= self._next_lock_attempt_at and now >= self.hold_off_until:
                self._last_lock_attempt_at = now
                self._start_io(TryLock(), now, actions)
        elif self.role is Role.ACQUIRED:
            if self._promotion_due(now):
                # Promotion needs a lease check that started after the wait.
                self._start_io(Revalidate(promotion=True), now, actions)
            elif now >= self._next_revalidation_at:
                self._start_io(Revalidate(), now, actions)
        elif (
            self.role is Role.MASTER or self._confirming_while_stopping
        ) and now >= self._next_revalidation_at:
            self._start_io(Revalidate(), now, actions)

    def _on_lock_result(self, acquired: bool, now: float, actions: list[Action]) -> None:
        if self.role not in (Role.STARTING, Role.SLAVE):
            return  # a stop overtook the attempt; the shell releases on exit
        self._next_lock_attempt_at = now + self.timings.lock_acquire_sleep_interval_s
        if self._retry_after_attempt:
            # The master left while this attempt was under way: it may have
            # seen the lock still held, so look again at once.
            self._retry_after_attempt = False
            self._next_lock_attempt_at = self._soonest_retry(now)
        if not acquired:
            self._first_seen_free_at = None
            self._apply("lock_busy", now, actions, "the lock is held by another node")
            return
        if self._first_seen_free_at is None:
            self._first_seen_free_at = now
        below = int(self.best_other_priority) - int(self.priority)
        if now - self._first_seen_free_at < self.timings.priority_delay(below):
            actions.append(YieldLock())
            self._apply(
                "lock_yielded", now, actions, "the lock is free; a higher priority node goes first"
            )
            return
        self._first_seen_free_at = None
        self._apply("lock_acquired", now, actions, "acquired the lock")
        self._start_io(ClaimEpoch(), now, actions)

    def _on_revalidated(self, started_at: float, now: float, actions: list[Action]) -> None:
        stopping = self._confirming_while_stopping and self.role in (Role.DEMOTING, Role.STOPPING)
        if self.role not in (Role.ACQUIRED, Role.MASTER) and not stopping:
            return
        self.last_ok_revalidation_start = started_at
        self._claim_expires_at = started_at + self.timings.lock_keep_alive_period_s
        self._next_revalidation_at = started_at + self.timings.lock_keep_alive_period_s / 2
        if stopping:
            return
        ready = self._takeover_ready_at
        if self._promotion_due(started_at) and ready is not None and started_at >= ready:
            self._takeover_ready_at = None
            assert self.epoch is not None
            self._apply("takeover_ready", now, actions, "takeover wait over, lease confirmed")
            actions.append(StartServing(self.epoch))
        else:
            self._apply("revalidated", now, actions, "lease confirmed")

    def _on_child_exit(self, code: int, now: float, actions: list[Action]) -> None:
        if self.role is not Role.MASTER:
            return
        window = self.timings.child_restart_window_s
        self._child_exits = [t for t in (*self._child_exits, now) if now - t <= window]
        if len(self._child_exits) > self.timings.child_max_restarts and not self.paused:
            self._child_exits.clear()
            why = f"the child keeps exiting (last code {code}); giving the lock up for another"
            self._give_up(now, actions, why, "child_crash_loop")
            return
        self._apply("child_exited", now, actions, f"child exited with code {code}; restarting")
        actions.append(RestartChild())

    def _on_pre_promote(self, veto: str | None, now: float, actions: list[Action]) -> None:
        if veto is None:
            self._pre_promote_passed = True
            return
        self._give_up(now, actions, veto, "pre_promote_vetoed")

    def _on_stop(self, reason: str, now: float, actions: list[Action]) -> None:
        if self.role in (Role.ACQUIRED, Role.MASTER):
            self._apply("stop", now, actions, reason)
            self._confirming_while_stopping = self.has_child
            actions.append(StopServing(graceful=True, reason=reason))
        elif self.role in (Role.STARTING, Role.SLAVE):
            self._apply("stop", now, actions, reason)
            actions.append(Exit())
        else:
            self._apply("stop", now, actions, reason)

    # ---- helpers -----------------------------------------------------------

    def _promotion_due(self, now: float) -> bool:
        ready = self._takeover_ready_at
        return (
            self.role is Role.ACQUIRED
            and self._journal_open
            and self._pre_promote_passed
            and ready is not None
            and now >= ready
        )

    def _give_up(self, now: float, actions: list[Action], reason: str, trigger: str) -> None:
        """A graceful demotion after a failed start or a crash loop; no lock for a while."""
        self.hold_off_until = now + self.timings.crash_loop_hold_off_s
        self._demote(now, actions, reason, graceful=True, trigger=trigger)

    def _demote(
        self, now: float, actions: list[Action], reason: str, *, graceful: bool, trigger: str
    ) -> None:
        self._takeover_ready_at = None
        self._apply(trigger, now, actions, reason)
        self._confirming_while_stopping = graceful and self.has_child
        actions.append(StopServing(graceful=graceful, reason=reason))

    def _after_role_entry(self, now: float, actions: list[Action]) -> None:
        if self.role is Role.SLAVE:
            self._journal_open = False
            self.epoch = None
            self.last_ok_revalidation_start = None
            self._claim_expires_at = float("-inf")
            self._next_lock_attempt_at = now + self.timings.lock_acquire_sleep_interval_s
        elif self.role is Role.STOPPED:
            actions.append(Exit())

    def _apply(self, trigger: str, now: float, actions: list[Action], reason: str) -> None:
        allowed = TRANSITIONS[self.role]
        if trigger not in allowed:
            raise RoleMachineError(f"{trigger!r} is not allowed in role {self.role}")
        new = allowed[trigger]
        if new is not self.role:
            actions.append(RoleChanged(self.role, new, self.epoch, reason))
            self.role = new
            self.since = now

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
