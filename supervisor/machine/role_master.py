"""The master's transitions: holding the lease (lease checks, the exec child's exits, a
step down, a failed start) and leaving (a stop, serving stopped, the exit).

Handlers named by the table (``role_table.py``), ``(event, now, actions)`` each, as
in ``roles.py``, which has the entry point and the slave's and the takeover's. No I/O.
"""

from __future__ import annotations

from primacy.supervisor.machine.role_core import RoleCore
from primacy.supervisor.machine.role_events import (
    CLAIM_LAPSED_EXIT,
    Action,
    ChildExited,
    ClaimFailed,
    Exit,
    JournalFailed,
    LeaseLost,
    RestartChild,
    Revalidate,
    RevalidationPassed,
    ServingFailed,
    ServingStopped,
    StepDownRequested,
    StopRequested,
    StopServing,
    Tick,
)
from primacy.supervisor.machine.role_table import State


class MasterSteps(RoleCore):
    """The handlers of a node that holds (or is leaving) the lease."""

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
