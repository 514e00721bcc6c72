"""The role machine's data, what the outside may ask of it, and the moves its handlers share.

No handler lives here: ``roles.py`` has the entry point and the slave's and the
takeover's handlers, ``role_master.py`` the master's and the leaving ones. Like
them, this file does no I/O and reads no clock: ``now`` is handed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from primacy.share.records import Role
from primacy.supervisor.machine.role_events import (
    GUARDIAN_KILL_LEAD,
    LEASE_CHECKS_PER_KEEPALIVE,
    Action,
    Priority,
    Revalidate,
    RoleChanged,
    StopServing,
    Timings,
)
from primacy.supervisor.machine.role_table import IGNORED, State, Step


class RoleMachineError(Exception):
    """A handler tried a move its table entry does not allow: a bug in the machine."""


@dataclass
class RoleCore:
    """The state, the timers and the settings the handlers read; the moves they share."""

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
    _collecting_s: float = 0.0  # the newest Tick's running total of collections
    _io_collecting_from: float = 0.0  # that total when the I/O in flight started
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
    def collecting_s(self) -> float:
        """The running total of garbage collections the newest Tick carried (``Tick``)."""
        return self._collecting_s

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
                deadlines.append(self._io_started_at + self._io_timeout() + self._io_collected())
        elif self.state in (State.STARTING, State.SLAVE):
            deadlines.append(max(self._next_lock_attempt_at, self.hold_off_until))
        elif self.state.checks_lease:
            deadlines.append(self._next_revalidation_at)
            if self.state is State.WAITING:
                deadlines.append(self._takeover_ready_at)
        if self.role is Role.MASTER and self._claim_expires_at > self._last_event_at:
            deadlines.append(self._claim_expires_at)  # once: a lapsed claim is not due again
        return min(deadlines, default=float("inf"))

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
        overdue = now - self._io_started_at - self._io_collected() >= self._io_timeout()
        if overdue and not self.paused:
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
        self._io_collecting_from = self._collecting_s
        actions.append(action)

    def _io_done(self) -> None:
        self._io_in_flight = None

    def _io_collected(self) -> float:
        """How long garbage collections held this process's interpreter since the I/O in flight
        started. Not the share's time: a check the share answered meanwhile could not be
        heard, and a master whose backlog made a collection outlast the keepalive stopped
        serving as if its share hung (docs/benchmarks.md, "The soak to a million"). Only the
        hung share's demotion waits for it; the claim still lapses one keepalive period after
        the last good check started (``_record_check``), so nothing a claim guards is
        stretched by it."""
        return self._collecting_s - self._io_collecting_from

    def _io_timeout(self) -> float:
        # A lock attempt or claim may take as long as the share needs; a lease
        # check that outlives the keepalive period means the share is sick.
        if isinstance(self._io_in_flight, Revalidate):
            return self.timings.lock_keep_alive_period_s
        return float("inf")
