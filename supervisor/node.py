"""The node's shell: carries out the role machine's actions and feeds back events.

Threads, each owned and stopped by ``Node``:
- the role loop (the thread that calls ``run``): the only one that touches the machine;
- the lock I/O worker: every operation on the lock file and epochs, and
  opening and closing the journal, one at a time, so a hung share blocks that
  worker and not the loop, which then demotes the node when a lease check
  outlives its keepalive period;
- the registry thread: publishes this node in the share and reads the others;
- the share watcher (``watchdog``): wakes a slave when the master leaves;
- the HTTP server (``api.server``).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from primacy.api.app import create_app
from primacy.api.metrics import NodeMetrics
from primacy.api.server import ApiServer
from primacy.api.snapshot import ShareCheck, StatusSnapshot
from primacy.broker.config import BrokerConfig
from primacy.broker.frames import FrameLimits
from primacy.broker.service import BrokerService
from primacy.locker.lease import Lease, LeaseLost
from primacy.store.errors import JournalError, JournalFenced
from primacy.store.journal import JournalStore
from primacy.supervisor import group_control, roles, sdnotify
from primacy.supervisor.admin import NodeAdmin
from primacy.supervisor.children import ChildProcess, become_subreaper
from primacy.supervisor.config import NodeConfig, parse_host_port
from primacy.supervisor.config_watch import ConfigWatcher
from primacy.supervisor.lock_io import LockIoWorker
from primacy.supervisor.registry import NodeEntry, NodeRegistry
from primacy.supervisor.roles import Priority, Role, RoleMachine
from primacy.supervisor.share_events import ShareWatcher

log = logging.getLogger("primacy.node")
KEEP_ALIVE_TERM = "lock_keep_alive_period_ms"

Clock = Callable[[], float]
_IDLE_TICK_S = 0.2


def package_version() -> str:
    try:
        return version("primacy")
    except PackageNotFoundError:
        return "0+unknown"


class Node:
    """One primacy supervisor: role loop, lock I/O, registry, HTTP, exec child."""

    def __init__(
        self,
        config: NodeConfig,
        clock: Clock = time.monotonic,
        admin_token: str | None = None,
        config_file: Path | None = None,
        reload_config: Callable[[], NodeConfig] | None = None,
        share_check: ShareCheck | None = None,
    ) -> None:
        self.config = config
        self._share_check = share_check
        self._clock = clock
        self._events: queue.Queue[roles.Event] = queue.Queue()
        self.machine = RoleMachine(config.timings(), config.node_priority)
        self.lease = Lease(config.share, config.node_id, config.lock_method)
        self._io = LockIoWorker(self._events.put)
        self._child = (
            ChildProcess(config.exec, config.exec_stop_grace_ms / 1000) if config.exec else None
        )
        self._registry = NodeRegistry(config.share)
        self._stop = threading.Event()
        self._registry_wake = threading.Event()
        self._exit = False
        self._since_unix_s = time.time()
        self._first_lock_attempt_done = False
        self._last_keepalive: tuple[float, float] | None = None  # (unix time, duration s)
        self._holder: dict[str, Any] | None = None
        # Why the last lock attempt failed with an error (not "busy"): such a slave cannot
        # reach the share, so it is no healthy standby (``/slave`` 503).
        self._lock_attempt_error: str | None = None
        self._store: JournalStore | None = None
        self._broker: BrokerService | None = None
        self._broker_stats: dict[str, Any] | None = None
        self._paused = False
        self._cluster: list[dict[str, Any]] = []
        self._version = package_version()
        self._notifier = sdnotify.Notifier()
        self._snapshot = self._build_snapshot()
        self.metrics = NodeMetrics(self.snapshot)
        admin = NodeAdmin(config.node_id, config.share, self.snapshot, self.post, self._io.call)
        host, port = config.http_host_port
        self._api = ApiServer(
            create_app(self.snapshot, self.metrics, admin, admin_token), host, port
        )
        self._config_watcher = (
            ConfigWatcher(config_file, reload_config, self._apply_config)
            if config_file is not None and reload_config is not None
            else None
        )
        self._registry_thread = threading.Thread(
            target=self._registry_loop, name="primacy-registry", daemon=True
        )
        self._watcher = ShareWatcher(
            config.share,
            config.node_id,
            on_master_left=lambda: self.post(roles.MasterLeft()),
            on_pause_changed=self._registry_wake.set,
        )

    # ---- public ------------------------------------------------------------

    def snapshot(self) -> StatusSnapshot:
        return self._snapshot

    def post(self, event: roles.Event) -> None:
        """Hand an event to the role loop from any thread."""
        self._events.put(event)

    def request_stop(self, reason: str) -> None:
        self.post(roles.StopRequested(reason))

    def run(self) -> int:
        """Run until stopped; returns the process exit code."""
        become_subreaper()
        self._api.start()  # raises ApiServerError before anything else has started
        self._registry_thread.start()
        self._watcher.start()
        if self._config_watcher is not None:
            self._config_watcher.start()
        log.info(
            "PRIMACY-1000 node %s starting: share=%s http=%s priority=%s",
            self.config.node_id,
            self.config.share,
            self._api.address,
            self.config.priority,
        )
        try:
            self._loop()
        finally:
            self._shutdown()
        return 0

    def install_signal_handlers(self) -> None:
        def on_signal(signum: int, _frame: object) -> None:
            self.request_stop(f"received {signal.Signals(signum).name}")

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    # ---- the role loop -----------------------------------------------------

    def _loop(self) -> None:
        event: roles.Event = roles.Tick()
        while not self._exit:
            now = self._clock()
            actions = self.machine.handle(event, now)
            if not isinstance(event, roles.Tick):
                actions += self.machine.handle(roles.Tick(), now)
            for action in actions:
                self._execute(action)
            if self._loop_proved_healthy(event):
                self._notifier.watchdog_if_due(now)
            self._check_child()
            self._snapshot = self._build_snapshot()
            if self._exit:
                break
            timeout = min(max(0.0, self.machine.next_deadline() - self._clock()), _IDLE_TICK_S)
            try:
                event = self._events.get(timeout=timeout)
            except queue.Empty:
                event = roles.Tick()

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
            case roles.TryLock():
                self._io.submit(self._try_lock)
            case roles.YieldLock():
                self._io.submit(self._yield_lock)
            case roles.ClaimEpoch():
                self._io.submit(self._claim_epoch)
            case roles.OpenJournal(epoch=epoch):
                self._io.submit(lambda: self._open_journal(epoch))
            case roles.Revalidate(promotion=True):
                started_at = self._clock()
                self._io.submit(lambda: self._journal_tenure(started_at))
            case roles.Revalidate():
                started_at = self._clock()
                self._io.submit(lambda: self._revalidate(started_at))
            case roles.StartServing(epoch=epoch):
                log.info(
                    "PRIMACY-1005 node %s serving as master, epoch %d", self.config.node_id, epoch
                )
                self._start_broker()
                self._start_child(epoch)
            case roles.RestartChild():
                if self._child is not None:
                    self._child.stop(graceful=False)
                    assert self.machine.epoch is not None
                    self._start_child(self.machine.epoch)
            case roles.StopServing(graceful=graceful, reason=reason):
                self._stop_serving(graceful, reason)
            case roles.RoleChanged() as change:
                self._on_role_changed(change)
            case roles.Exit():
                self._exit = True

    # ---- lock I/O jobs (run on the lock I/O worker) ---------------------------

    def _try_lock(self) -> roles.Event:
        try:
            acquired = self.lease.try_acquire() and not self._switchover_holds_us_back()
            self._lock_attempt_error = None
        except OSError as exc:
            log.warning("PRIMACY-1007 node %s cannot try the lock: %s", self.config.node_id, exc)
            acquired = False
            self._lock_attempt_error = str(exc)
        holder = self.lease.holder()
        self._holder = None if holder is None else vars(holder).copy()
        outcome = "acquired" if acquired else "error" if self._lock_attempt_error else "busy"
        self.metrics.lock_attempts.labels(outcome).inc()
        return roles.LockResult(acquired)

    def _switchover_holds_us_back(self) -> bool:
        """After taking the lock: if a switchover names another node, give the lock back.

        Read after acquiring, not before: the old master writes the request
        before it releases, so whoever gets the lock after the release sees it.
        """
        request = group_control.read_switchover(self.config.share)
        if request is None or not request.holds_back(
            self.config.node_id, self.lease.epochs.latest(), time.time()
        ):
            return False
        self.lease.abandon()
        return True

    def _yield_lock(self) -> None:
        self.lease.abandon()

    def _claim_epoch(self) -> roles.Event:
        try:
            epoch = self.lease.claim_epoch(self._terms())
            # Every earlier master that may still claim the role: the previous one, and
            # before it any whose successor stopped during its takeover wait.
            earlier = self.lease.terms_to_outlast()
            periods = [
                float(record[KEEP_ALIVE_TERM])
                for record in earlier
                if isinstance(record.get(KEEP_ALIVE_TERM), int | float)
            ]
        except (OSError, LeaseLost) as exc:
            return roles.LeaseLost(f"claiming an epoch failed: {exc}")
        holder = self.lease.holder()
        self._holder = None if holder is None else vars(holder).copy()
        log.info("PRIMACY-1002 node %s claimed epoch %d", self.config.node_id, epoch)
        group_control.clear_switchover(self.config.share)
        previous_s = max(periods) / 1000 if periods else None
        return roles.EpochClaimed(epoch, previous_s, handed_over=self.lease.handed_over(earlier))

    def _terms(self) -> dict[str, Any]:
        """What the next master must know about this one: how long its claims last."""
        return {KEEP_ALIVE_TERM: round(self.machine.timings.lock_keep_alive_period_s * 1000)}

    def _revalidate(self, started_at: float) -> roles.Event:
        try:
            self.lease.revalidate()
        except LeaseLost as exc:
            return roles.LeaseLost(str(exc))
        self._note_keepalive(started_at)
        return roles.RevalidationPassed(started_at)

    def _note_keepalive(self, started_at: float) -> None:
        duration_s = self._clock() - started_at
        self._last_keepalive = (time.time(), duration_s)
        self.metrics.keepalive_seconds.observe(duration_s)

    def _open_journal(self, epoch: int) -> roles.Event:
        config = self.config.store_config()
        try:
            store = JournalStore.open(config, epoch=epoch, fencing_check=self.lease.revalidate)
        except (JournalError, OSError, ValueError) as exc:
            return roles.JournalFailed(str(exc))
        store.commit_observer = self.metrics.observe_commit
        self._store = store
        return roles.JournalOpened()

    def _journal_tenure(self, started_at: float) -> roles.Event:
        """The promotion's lease check, as the commit of the tenure record.

        The record is written, synced, then fencing-checked by a lease check that
        starts after the write: passing it is the fresh check promotion needs, and
        every master a client or load balancer ever saw has its tenure in the journal.
        """
        store = self._store
        if store is None:
            return roles.JournalFailed("the journal is not open")
        try:
            self.lease.mark_outlasted()  # the takeover wait is over; before serving
        except LeaseLost as exc:
            return roles.LeaseLost(f"recording the end of the takeover wait failed: {exc}")
        event = _role_change(self.config.node_id, store.epoch, "acquired", "master", "serving")
        try:
            store.append_control(event).result()
        except JournalFenced as exc:
            return roles.LeaseLost(f"the fencing check of the tenure record failed: {exc}")
        except JournalError as exc:
            return roles.JournalFailed(f"the tenure record was not journaled: {exc}")
        self._note_keepalive(started_at)
        return roles.RevalidationPassed(started_at)

    def _close_journal(self, graceful: bool, reason: str) -> None:
        """Stop journal writes before the lock goes: nothing may be written under a lost lock."""
        store, self._store = self._store, None
        if store is None:
            return
        if graceful:
            _append_role_change(store, self.config.node_id, "master", "stopping", reason)
        store.close()

    def _release(self, graceful: bool, reason: str = "stopping") -> roles.Event:
        """Let the lock go; whatever the share does, the role loop hears that serving stopped."""
        self._close_journal(graceful, reason)
        if graceful:
            try:
                self.lease.release()
                log.info("PRIMACY-1004 node %s released the lock", self.config.node_id)
            except OSError as exc:
                log.warning(
                    "PRIMACY-1009 node %s could not mark the lock released (%s); dropping it",
                    self.config.node_id,
                    exc,
                )
                self.lease.abandon()
        else:
            self.lease.abandon()
        # The lock is free now: this entry wakes the slaves watching the share.
        self._refresh_registry(released=True)
        return roles.ServingStopped()

    # ---- serving -----------------------------------------------------------

    def _start_child(self, epoch: int) -> None:
        if self._child is None:
            return
        self._child.start(
            {
                "PRIMACY_EPOCH": str(epoch),
                "PRIMACY_NODE_ID": self.config.node_id,
                "PRIMACY_SHARE": str(Path(self.config.share).resolve()),
            }
        )

    def _check_child(self) -> None:
        if self._child is None:
            return
        code = self._child.poll_exit()
        if code is not None:
            log.warning(
                "PRIMACY-1104 child of node %s exited with code %d", self.config.node_id, code
            )
            self.post(roles.ChildExited(code))

    def _start_broker(self) -> None:
        if self.config.stomp is None or self._store is None:
            return
        host, port = parse_host_port(self.config.stomp)
        service = BrokerService(self._store, host, port, _broker_config(self._store))
        service.on_fatal = lambda reason: self.post(
            roles.LeaseLost(f"the journal failed: {reason}")
        )
        try:
            service.start()
        except OSError as exc:
            log.error(
                "PRIMACY-1015 node %s cannot listen for STOMP on %s (%s); stepping down",
                self.config.node_id,
                self.config.stomp,
                exc,
            )
            self.post(roles.StepDownRequested(f"cannot listen on {self.config.stomp}"))
            return
        self._broker = service

    def _stop_broker(self) -> None:
        service, self._broker = self._broker, None
        if service is not None:
            service.stop()  # closes the listener and every connection at once

    def _stop_serving(self, graceful: bool, reason: str) -> None:
        level = logging.INFO if graceful else logging.ERROR
        code = "PRIMACY-1006" if graceful else "PRIMACY-1003"
        log.log(level, "%s node %s stops serving: %s", code, self.config.node_id, reason)
        self._stop_broker()
        if self._child is not None:
            self._child.stop(graceful=graceful)
        self._io.submit(lambda: self._release(graceful, reason))

    def _on_role_changed(self, change: roles.RoleChanged) -> None:
        self._since_unix_s = time.time()
        self.metrics.role_changes.labels(str(change.new)).inc()
        if change.old is Role.STARTING:
            self._first_lock_attempt_done = True
            self._notifier.ready()
        if change.new is Role.STOPPING or (change.new is Role.STOPPED and change.old is Role.SLAVE):
            self._notifier.stopping()
        epoch = change.epoch if change.epoch is not None else self.machine.epoch
        self._notifier.status(f"{change.new} (epoch {epoch}): {change.reason}")
        # Publish the new role at once (the machine already has it; the snapshot not yet).
        self._snapshot = self._build_snapshot()
        self._registry_wake.set()
        log.info(
            "PRIMACY-1001 node %s role %s -> %s epoch=%s: %s",
            self.config.node_id,
            change.old,
            change.new,
            epoch,
            change.reason,
        )

    # ---- registry ----------------------------------------------------------

    def _registry_loop(self) -> None:
        interval_s = self.config.registry_refresh_ms / 1000
        while not self._stop.is_set():
            self._refresh_registry()
            self._registry_wake.wait(interval_s)
            self._registry_wake.clear()

    def _refresh_registry(self, released: bool = False) -> None:
        """Publish this node, read the others and the pause marker.

        ``released``: the lock was just let go, so say so even if the role loop
        has not caught up (slaves take the entry's role as the signal to try).
        """
        snap = self._snapshot
        role = snap.role
        if released:
            role = str(Role.STOPPED if snap.role in (Role.STOPPING, Role.STOPPED) else Role.SLAVE)
        entry = NodeEntry(
            self.config.node_id,
            socket.gethostname(),
            os.getpid(),
            self._api.address,
            self.machine.priority.name.lower(),
            role,
            snap.epoch,
            time.time(),
        )
        try:
            self._registry.publish(entry)
            entries = self._registry.entries()
            paused = group_control.is_paused(self.config.share)
        except OSError as exc:
            log.warning(
                "PRIMACY-1008 node %s cannot refresh the node registry: %s",
                self.config.node_id,
                exc,
            )
            return
        now = time.time()
        self._cluster = [{**asdict(e), "live": e.is_live(now)} for e in entries]
        broker = self._broker
        self._broker_stats = broker.stats() if broker is not None else None
        others = [e for e in entries if e.node_id != self.config.node_id and e.is_live(now)]
        best = max((_priority_of(other) for other in others), default=Priority.NEVER)
        if best != self.machine.best_other_priority:
            self.post(roles.PeersSeen(best))
        if paused != self._paused:
            self._paused = paused
            log.info(
                "PRIMACY-1024 node %s sees the group %s",
                self.config.node_id,
                "paused" if paused else "resumed",
            )
            self.post(roles.PauseChanged(paused))

    def _apply_config(self, new: NodeConfig) -> None:
        """A valid edit of the config file: priority and timings now, the rest after a restart."""
        old = self.config
        live_keys = {
            "priority",
            "lock_acquire_sleep_interval_ms",
            "lock_keep_alive_period_ms",
            "takeover_delay_ms",
        }
        changed = {k for k in type(old).model_fields if getattr(old, k) != getattr(new, k)}
        for key in sorted(changed - live_keys):
            log.warning(
                "PRIMACY-1013 node %s: %s changed in the config file; it takes effect "
                "after a restart",
                self.config.node_id,
                key,
            )
        if new.priority != old.priority:
            self.post(roles.PriorityChanged(new.node_priority))
        if changed & (live_keys - {"priority"}):
            self._change_timings(new.timings())
        # Only the live keys: the rest (share, node id, journal settings, ...) must wait for
        # the restart the log asks for. A share or node id swapped under a running node
        # would pair one share's lease with another's journal.
        self.config = old.model_copy(update={key: getattr(new, key) for key in changed & live_keys})
        log.info(
            "PRIMACY-1014 node %s applied the edited config: %s",
            self.config.node_id,
            ", ".join(sorted(changed & live_keys)) or "nothing live changed",
        )

    def _change_timings(self, timings: roles.Timings) -> None:
        """Keep the epoch record's keepalive no shorter than the one our claims use."""
        current = self.machine.timings.lock_keep_alive_period_s
        longer = timings.lock_keep_alive_period_s > current

        def record_then_apply() -> roles.Event | None:
            if self.lease.epoch is not None:
                try:
                    self.lease.update_terms(
                        {KEEP_ALIVE_TERM: round(timings.lock_keep_alive_period_s * 1000)}
                    )
                except LeaseLost as exc:
                    return roles.LeaseLost(str(exc))
            return roles.TimingsChanged(timings) if longer else None

        if not longer:
            self.post(roles.TimingsChanged(timings))  # a shorter claim is safe at once
        self._io.submit(record_then_apply)

    # ---- snapshot and shutdown -----------------------------------------------

    def _build_snapshot(self) -> StatusSnapshot:
        keepalive = self._last_keepalive
        return StatusSnapshot(
            node=self.config.node_id,
            role=str(self.machine.role),
            epoch=self.machine.epoch,
            since_unix_s=self._since_unix_s,
            priority=self.machine.priority.name.lower(),
            master_claim_expires_monotonic=self.machine.claim_expires_at(),
            lock_io_overdue_monotonic=self._lock_io_overdue_at(),
            last_keepalive_unix_s=keepalive[0] if keepalive else None,
            last_keepalive_duration_s=keepalive[1] if keepalive else None,
            lock_holder=self._holder,
            first_lock_attempt_done=self._first_lock_attempt_done,
            lock_attempt_error=self._lock_attempt_error,
            version=self._version,
            share=str(self.config.share),
            share_check=self._share_check,
            extra={
                "journal": _journal_figures(self._store),
                "paused": self._paused,
                "broker": self._broker_stats,
                "cluster": self._cluster,
            },
        )

    def _lock_io_overdue_at(self) -> float:
        """When a lock operation under way stops counting as alive (a hung share)."""
        started = self.machine.lock_io_started_at
        if started is None:
            return float("inf")
        timings = self.machine.timings
        return started + 2 * max(
            timings.lock_keep_alive_period_s, timings.lock_acquire_sleep_interval_s
        )

    def _shutdown(self) -> None:
        self._stop.set()
        self._registry_wake.set()
        self._stop_broker()
        if self._child is not None:
            self._child.stop(graceful=True)
        self._io.submit(self._final_release)
        if not self._io.close(timeout_s=5.0):
            log.error(
                "PRIMACY-1009 node %s: the share did not answer while releasing the lock",
                self.config.node_id,
            )
        else:
            # After the lock is free: this entry is what wakes the slaves.
            self._registry_thread.join(5.0)
            self._refresh_registry()
        self._snapshot = self._build_snapshot()
        self._watcher.stop()  # last: joining the observer takes a while and wakes no one
        self._api.stop()
        self._notifier.close()
        log.info("PRIMACY-1010 node %s stopped", self.config.node_id)

    def _final_release(self) -> None:
        if self.lease.held:
            self._release(graceful=True)
        else:
            self.lease.abandon()


def _role_change(node_id: str, epoch: int, old: str, new: str, reason: str) -> dict[str, object]:
    return {
        "event": "role",
        "node": node_id,
        "from": old,
        "to": new,
        "epoch": epoch,
        "reason": reason,
    }


def _append_role_change(store: JournalStore, node_id: str, old: str, new: str, reason: str) -> None:
    event = _role_change(node_id, store.epoch, old, new, reason)
    try:
        store.append_control(event).add_done_callback(_log_control_failure)
    except JournalError as exc:
        log.warning("PRIMACY-1012 node %s could not journal %s -> %s: %s", node_id, old, new, exc)


def _log_control_failure(future: Future[int]) -> None:
    if future.exception() is not None:
        log.warning("PRIMACY-1012 a role change was not journaled: %s", future.exception())


def _journal_figures(store: JournalStore | None) -> dict[str, Any] | None:
    if store is None:
        return None
    stats = store.stats()
    return {
        "epoch": stats.epoch,
        "sync_policy": str(stats.sync_policy),
        "last_sequence": stats.last_sequence,
        "pending_messages": stats.pending_messages,
        "records_written": stats.records_written,
        "bytes_written": stats.bytes_written,
        "batches_written": stats.batches_written,
        "current_segment": stats.current_segment,
        "fenced_records": stats.fenced_records_at_open,
        "damaged_batches": stats.damaged_batches_at_open,
        "torn_tails": stats.torn_tails_at_open,
        "failure": stats.failure,
        "settings": {
            "segment_max_bytes": store.config.segment_max_bytes,
            "max_message_size": store.config.max_message_size,
            "retention_max_age_s": store.config.retention_max_age_s,
            "retention_max_bytes": store.config.retention_max_bytes,
            "dedupe_window_messages": store.config.dedupe_window_messages,
        },
    }


def _broker_config(store: JournalStore) -> BrokerConfig:
    """Frames big enough for the largest message the journal takes, plus a full header section."""
    default = FrameLimits()
    largest = store.config.max_message_size + default.max_header_bytes
    return BrokerConfig(
        frame_limits=FrameLimits(max_frame_bytes=max(default.max_frame_bytes, largest))
    )


def _priority_of(entry: NodeEntry) -> Priority:
    try:
        return Priority[entry.priority.upper()]
    except KeyError:
        return Priority.NEVER
