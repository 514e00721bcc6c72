"""The node: the role loop, which alone owns and changes the node's state.

The rule, kept true by this module: every field of ``Node`` is written only on
the role loop (the thread that calls ``run``). Every other thread (lock I/O,
child, registry, share and config watchers, HTTP, the broker's event loop, the
journal writer) does its own I/O and posts an immutable event
(``supervisor.node_events`` or a role-machine event) to the loop's queue;
readers get the immutable ``StatusSnapshot`` the loop publishes.
docs/architecture.md lists the threads, what each owns and posts.
"""

from __future__ import annotations

import collections
import logging
import queue
import time
from collections.abc import Callable
from pathlib import Path

from primacy.api.snapshot import ShareCheck, StatusSnapshot
from primacy.share.port import SharePort
from primacy.supervisor import codes
from primacy.supervisor.child.children import become_subreaper
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.machine import roles
from primacy.supervisor.machine.roles import Priority, Role, RoleMachine
from primacy.supervisor.shell import node_parts
from primacy.supervisor.shell.collector_time import CollectorTime
from primacy.supervisor.shell.config_watch import live_edit
from primacy.supervisor.shell.node_events import (
    ChildReady,
    ConfigEdited,
    NodeEvent,
    RegistryRead,
    SessionChanged,
    ThreadDied,
)
from primacy.supervisor.shell.share_jobs import lease_lost
from primacy.supervisor.shell.status import NodeState, build_snapshot
from primacy.supervisor.version import package_version

log = logging.getLogger("primacy.node")

Clock = Callable[[], float]
_IDLE_TICK_S = 0.2
_CLOSE_TIMEOUT_S = 5.0


class Node:
    """One primacy supervisor: the role loop and the threads it owns."""

    def __init__(
        self,
        config: NodeConfig,
        clock: Clock = time.monotonic,
        admin_token: str | None = None,
        config_file: Path | None = None,
        reload_config: Callable[[], NodeConfig] | None = None,
        share_check: ShareCheck | None = None,
        share_port: SharePort | None = None,
    ) -> None:
        self.config = config
        self._share_check = share_check
        self._clock = clock
        self._collector_time = CollectorTime(clock)
        self._events: queue.Queue[roles.Event | NodeEvent] = queue.Queue()
        self._machine_events: collections.deque[roles.Event] = collections.deque()
        self.machine = RoleMachine(
            config.timings(),
            config.node_priority,
            has_child=bool(config.exec),
            has_pre_promote=config.pre_promote is not None,
        )
        # The node's state: written on the role loop only (see the module's docstring).
        self._exit = False
        self._exit_code = 0
        self._role_changed = False
        self._leaving: roles.RoleChanged | None = None  # a master's change, journaled at release
        self._state = NodeState(since_unix_s=time.time())
        self._version = package_version()
        parts = node_parts.wire(
            config,
            clock,
            self.post,
            self.snapshot,
            admin_token,
            config_file,
            reload_config,
            share_port,
        )
        self._parts = parts
        self._io, self._serving, self._jobs = parts.io, parts.serving, parts.jobs
        self._notifier, self.metrics, self._registry = parts.notifier, parts.metrics, parts.registry
        self._lb = parts.lb
        # "connecting" until its client says otherwise; None for a port without a session.
        self._state.coordination_session = parts.port.session_state
        self._snapshot = self._build_snapshot()

    # ---- for every thread ----------------------------------------------------

    def snapshot(self) -> StatusSnapshot:
        """The loop's latest published view (immutable; replaced, never changed)."""
        return self._snapshot

    def post(self, event: roles.Event | NodeEvent) -> None:
        """Hand an event to the role loop from any thread."""
        self._events.put(event)

    def request_stop(self, reason: str) -> None:
        self.post(roles.StopRequested(reason))

    def run(self) -> int:
        """Run until stopped; returns the process exit code."""
        become_subreaper()
        node_parts.start(self._parts, self.config)  # ApiServerError before anything else
        self._collector_time.install()
        try:
            self._loop()
        except Exception:
            log.exception(
                "%s node %s: the role loop failed", codes.ROLE_LOOP_FAILED, self.config.node_id
            )
            self._exit_code = 1
        finally:
            self._shutdown()
            self._collector_time.uninstall()
        return self._exit_code

    # ---- the role loop -------------------------------------------------------

    def _loop(self) -> None:
        event: roles.Event = self._tick()
        while not self._exit:
            now = self._clock()
            actions = self.machine.handle(event, now)
            if not isinstance(event, roles.Tick):
                actions += self.machine.handle(self._tick(), now)
            for action in actions:
                self._execute(action)
            self._serving.confirm_claim(self.machine.child_may_live_until())
            if self._loop_proved_healthy(event):
                self._notifier.watchdog_if_due(now)
            self._snapshot = self._build_snapshot()
            # Pushed to the load balancers (never blocks): up once /master says 200.
            master = self.machine.role is Role.MASTER
            self._lb.follow(self._snapshot.is_serving_master(self._clock()), master)
            if self._role_changed:  # after publishing: the registry writes what it reads
                self._role_changed = False
                self._registry.wake()
            if self._exit:
                break
            timeout = min(max(0.0, self.machine.next_deadline() - self._clock()), _IDLE_TICK_S)
            event = self._next_machine_event(timeout)

    def _next_machine_event(self, timeout_s: float) -> roles.Event:
        """The next event for the machine; node events are recorded on the way."""
        deadline = self._clock() + timeout_s
        while not self._machine_events:
            try:
                event = self._events.get(timeout=max(0.0, deadline - self._clock()))
            except queue.Empty:
                return self._tick()
            recorded = self._record(event)
            if recorded is not None:
                self._machine_events.append(recorded)
        return self._machine_events.popleft()

    def _tick(self) -> roles.Tick:
        return roles.Tick(collecting_s=self._collector_time.total_s)

    def _tell_machine(self, event: roles.Event) -> None:
        """Queue a machine event decided on the loop (handled before the next posted one)."""
        self._machine_events.append(event)

    def _record(self, event: roles.Event | NodeEvent) -> roles.Event | None:
        """Update the node's state from what an event carries; return what the machine must
        hear (the machine's own events go on to it, whatever state it is in)."""
        match event:
            case roles.LockResult(
                acquired=acquired, holder=holder, error=error, share_unusable=unusable
            ):
                self._state.holder = holder
                self._state.share_unusable = unusable
                floor = self._state.behind_share_floor
                if floor is not None and holder is not None and (holder.epoch or 0) > floor:
                    self._state.behind_share_floor = None  # a claim past the floor: it agrees
                self._state.lock_attempt_error = error
                outcome = "acquired" if acquired else "error" if error else "busy"
                self.metrics.lock_attempts.labels(outcome).inc()
            case roles.EpochClaimed(holder=holder):
                self._state.holder = holder
                self._state.behind_share_floor = None
            case roles.ClaimFailed(behind_share_floor=floor, share_unusable=unusable):
                self._state.behind_share_floor = floor
                self._state.share_unusable = unusable
            case roles.JournalOpened(store=store):
                # The loop owns it now; the machine says whether to keep it (CloseJournal).
                self._state.store = store
            case roles.RevalidationPassed(duration_s=duration, finished_unix_s=at):
                self._state.last_keepalive = (at, duration)
                self.metrics.keepalive_seconds.observe(duration)
            case RegistryRead() as read:
                return self._on_registry_read(read)
            case ConfigEdited(config=new):
                self._apply_config(new)
                return None
            case ChildReady():
                self._serving.child_ready()
                return None
            case SessionChanged(state=session):
                log.info(
                    "%s node %s: the %s session is %s",
                    codes.COORDINATION_SESSION,
                    self.config.node_id,
                    self.config.coordination,
                    session,
                )
                self._state.coordination_session = session
                self.metrics.session_changes.labels(session).inc()
                return None
            case ThreadDied(thread=name, error=error):
                self._exit_code = 1
                return roles.StopRequested(f"thread {name} died: {error}")
        return event

    def _loop_proved_healthy(self, event: roles.Event) -> bool:
        """Whether this iteration shows the node working, so the systemd watchdog may be fed.

        A completed lock operation shows the share answers; a node that never
        takes the lock does no lock I/O, so its running loop is the proof.
        A node stuck on a hung share stops feeding the watchdog and is killed.
        """
        if isinstance(event, roles.LockResult | roles.EpochClaimed | roles.RevalidationPassed):
            return True
        return self.config.node_priority is Priority.NEVER and self.machine.role is Role.SLAVE

    def _execute(self, action: roles.Action) -> None:
        match action:
            case (
                roles.TryLock()
                | roles.YieldLock()
                | roles.ClaimEpoch()
                | roles.OpenJournal()
                | roles.Revalidate()
            ):
                keep_alive_ms = round(self.machine.timings.lock_keep_alive_period_s * 1000)
                store, started_at = self._state.store, self._clock()
                self._io.submit(
                    *self._jobs.job_for(action, self.config, keep_alive_ms, store, started_at)
                )
            case roles.StartServing(epoch=epoch):
                log.info(
                    "%s node %s serving as master, epoch %d",
                    codes.SERVING,
                    self.config.node_id,
                    epoch,
                )
                live_until = self.machine.child_may_live_until()
                failure = self._serving.start(epoch, self._state.store, live_until)
                if failure is not None:
                    # Decided now, before this iteration publishes a snapshot: /master never
                    # says 200 for a master that cannot serve.
                    for action in self.machine.handle(roles.ServingFailed(failure), self._clock()):
                        self._execute(action)
            case roles.RestartChild():
                if self.machine.epoch is not None:
                    live_until = self.machine.child_may_live_until()
                    self._serving.restart_child(self.machine.epoch, live_until)
            case roles.RunPrePromote(epoch=epoch):
                self._serving.run_pre_promote(epoch)
            case roles.StopServing(graceful=graceful, reason=reason):
                self._stop_serving(graceful, reason)
            case roles.CloseJournal():
                self._close_journal()
            case roles.Refused() as refused:
                self._on_refused(refused)
            case roles.RoleChanged() as change:
                self._on_role_changed(change)
            case roles.Exit():
                self._exit = True

    # ---- serving -------------------------------------------------------------

    def _stop_serving(self, graceful: bool, reason: str) -> None:
        """Close every connection at once; the child's tree dies before the lock is let go."""
        level = logging.INFO if graceful else logging.ERROR
        code = codes.SERVING_STOPPED if graceful else codes.LEASE_LOST
        log.log(level, "%s node %s stops serving: %s", code, self.config.node_id, reason)
        self._lb.follow(False, False)  # queued before the listener closes (docs/safety.md)
        store, self._state.store = self._state.store, None
        jobs, registry = self._jobs, self._registry
        leaving, self._leaving = self._leaving, None  # the machine's change, as it said it

        def release() -> roles.Event:
            stopped = jobs.release(store, graceful, leaving)
            registry.publish_released()  # the lock is free: this entry wakes the slaves
            return stopped

        def submit_release() -> None:
            self._io.submit(release, lambda exc: roles.ServingStopped())

        self._serving.stop(graceful, then=submit_release)

    def _close_journal(self) -> None:
        """A recovery finished after a stop or demotion overtook it: close what it opened (its
        release job has already let the lock go, so nothing more is written)."""
        store, self._state.store = self._state.store, None
        if store is not None:
            self._io.submit(store.close)

    def _on_refused(self, refused: roles.Refused) -> None:
        log.warning(
            "%s node %s: %r in state %s changed nothing: %s",
            codes.EVENT_REFUSED,
            self.config.node_id,
            refused.event,
            refused.state,
            refused.why,
        )
        if isinstance(refused.event, roles.JournalOpened):
            self._close_journal()  # no state of the machine owns it

    def _on_role_changed(self, change: roles.RoleChanged) -> None:
        self._state.since_unix_s = time.time()
        self.metrics.role_changes.labels(str(change.new)).inc()
        if change.old is Role.STARTING:
            self._state.first_lock_attempt_done = True
        epoch = change.epoch if change.epoch is not None else self.machine.epoch
        status = f"{change.new} (epoch {epoch}): {change.reason}"
        self._notifier.role_changed(change.old, change.new, status)
        # Publish the new role at once (the machine already has it; the snapshot not yet),
        # except a new master's: it is published once serving started (this iteration).
        if change.new is not Role.MASTER:
            self._snapshot = self._build_snapshot()
        if change.new is Role.SLAVE:  # a warm standby, if configured, from now on
            self._serving.stand_by()
            self._parts.following.restart()  # a hot journal from now on
        if change.old is Role.MASTER:  # journaled by the release, before the journal closes
            self._leaving = change
        self._role_changed = True
        log.info(
            "%s node %s role %s -> %s epoch=%s: %s",
            codes.ROLE_CHANGED,
            self.config.node_id,
            change.old,
            change.new,
            epoch,
            change.reason,
        )

    # ---- what other threads told us ------------------------------------------

    def _on_registry_read(self, read: RegistryRead) -> roles.Event | None:
        self._state.saw_registry(read.cluster, read.broker_stats if self._serving.serving else None)
        # The machine holds the one "paused" (an admin pause reaches it at once; the
        # snapshot reads it there): the registry only tells it what the share says.
        if read.paused != self.machine.paused:
            log.info(
                "%s node %s sees the group %s",
                codes.GROUP_PAUSE_SEEN,
                self.config.node_id,
                "paused" if read.paused else "resumed",
            )
            self._tell_machine(roles.PauseChanged(read.paused))
        if read.best_other_priority != self.machine.best_other_priority:
            return roles.PeersSeen(read.best_other_priority)
        return None

    def _apply_config(self, new: NodeConfig) -> None:
        """A valid edit of the config file: the live keys now, the rest after a restart."""
        self.config, changed = live_edit(self.config, new)
        if "priority" in changed:
            self._tell_machine(roles.PriorityChanged(self.config.node_priority))
        if changed - {"priority"}:
            self._change_timings(self.config.timings())

    def _change_timings(self, timings: roles.Timings) -> None:
        """A shorter claim is safe at once; a longer one once the epoch record says so."""
        longer = timings.lock_keep_alive_period_s > self.machine.timings.lock_keep_alive_period_s
        if not longer:
            self._tell_machine(roles.TimingsChanged(timings))
        jobs = self._jobs
        self._io.submit(
            lambda: jobs.record_keep_alive(timings, longer), lease_lost("recording the keepalive")
        )

    # ---- snapshot and shutdown -------------------------------------------------

    def _build_snapshot(self) -> StatusSnapshot:
        state, now = self._state, self._clock()
        waiting_for = self._serving.waiting_for
        return build_snapshot(
            self.config,
            self.machine,
            state,
            now,
            self._version,
            self._share_check,
            waiting_for,
            self._parts.following.status,
        )

    def _shutdown(self) -> None:
        if not self._serving.close(timeout_s=_CLOSE_TIMEOUT_S * 6):
            log.error(
                "%s node %s: the child did not stop", codes.CHILD_NOT_KILLED, self.config.node_id
            )
        store, self._state.store = self._state.store, None
        jobs = self._jobs
        self._io.submit(lambda: jobs.release(store, True))
        released = self._io.close(timeout_s=_CLOSE_TIMEOUT_S)
        if not released:
            log.error(
                "%s node %s: the share did not answer while releasing the lock",
                codes.RELEASE_UNANSWERED,
                self.config.node_id,
            )
        # After the lock is free: this entry is what wakes the slaves.
        self._snapshot = self._build_snapshot()
        node_parts.close_after_release(self._parts, _CLOSE_TIMEOUT_S, released)
        log.info("%s node %s stopped", codes.NODE_STOPPED, self.config.node_id)
