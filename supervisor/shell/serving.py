"""What a master serves: the built-in STOMP connector and the exec child, started and stopped.

With ``exec_warm_standby`` the child is started on a slave too, behind a closed
gate (``stand_by``), and promotion opens the gate instead of starting it.

Used on the role loop only (its one owner). Nothing here blocks: binding the
listener is immediate, closing it aborts every connection at once, and the
child is started and stopped by its own thread (``ChildControl``), which runs
the lock's release only once the child's tree is dead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from primacy.broker.event_loop import preload
from primacy.broker.service import BrokerService
from primacy.broker.users import UsersFileError
from primacy.store.journal import JournalStore
from primacy.supervisor import codes
from primacy.supervisor.child.child_control import ChildControl
from primacy.supervisor.child.child_ready import ready_check, ready_wait
from primacy.supervisor.child.children import ChildProcess
from primacy.supervisor.child.pre_promote import run_pre_promote
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.config.listen_addresses import parse_host_port
from primacy.supervisor.machine import roles
from primacy.supervisor.machine.role_events import Priority
from primacy.supervisor.shell.node_events import ChildReady
from primacy.supervisor.shell.thread_deaths import ThreadDeaths

log = logging.getLogger("primacy.node")


class Serving:
    """The connector and the child of one node; ``start`` when master, ``stop`` on demotion."""

    def __init__(
        self,
        config: NodeConfig,
        post: Callable[[roles.Event | ChildReady], None],
        deaths: ThreadDeaths | None = None,
    ) -> None:
        self._config = config
        self._post = post
        self._deaths = deaths
        self._broker: BrokerService | None = None
        self._claim_confirmed = float("-inf")  # what the child's guardian was told last
        # Resolved once, at start: a path resolved at each takeover would stat a share
        # that may hang, on the role loop.
        self._share = str(Path(config.share).resolve())
        if config.stomp is not None:  # loaded before a claim, not after it (issue 44)
            preload(config.broker_config().stomp_event_loop)
        # What a master waits for before it serves: its child's readiness check, or None.
        self.waiting_for: str | None = None
        self._child = (
            ChildControl(
                ChildProcess(config.exec, config.exec_stop_grace_ms / 1000),
                post,
                lambda: ready_check(config),
                config.exec_ready_timeout_s,
                deaths,
            )
            if config.exec
            else None
        )

    def start_threads(self) -> None:
        if self._child is not None:
            self._child.start_thread()

    @property
    def serving(self) -> bool:
        return self._broker is not None

    def start(self, epoch: int, store: JournalStore | None, claim_until: float) -> str | None:
        """Start the connector, then the child (whose guardian kills it at ``claim_until``
        unless confirmed); why serving could not start, or None."""
        stomp = self._config.stomp
        if stomp is not None and store is not None:
            host, port = parse_host_port(stomp)
            websocket = self._config.stomp_websocket
            service = BrokerService(
                store,
                host,
                port,
                self._config.broker_config(),
                parse_host_port(websocket) if websocket is not None else None,
            )
            service.on_fatal = lambda reason: self._post(
                roles.LeaseLost(f"the journal failed: {reason}")
            )
            if self._deaths is not None:  # a bug on its loop ends its thread: the node stops
                service.on_thread_death = self._deaths.died
            try:
                service.start()
            except OSError as exc:
                log.error(
                    "%s node %s cannot listen for STOMP on %s (%s); stepping down",
                    codes.SERVING_NOT_STARTED,
                    self._config.node_id,
                    stomp if websocket is None else f"{stomp} and {websocket} (WebSocket)",
                    exc,
                )
                return f"cannot listen for STOMP on {stomp}: {exc}"
            except UsersFileError as exc:  # checked at start; edited into garbage since
                log.error(
                    "%s node %s cannot check STOMP logins (%s); stepping down",
                    codes.SERVING_NOT_STARTED,
                    self._config.node_id,
                    exc,
                )
                return f"cannot check STOMP logins: {exc}"
            self._broker = service
        self._start_child(epoch, claim_until)
        return None

    def restart_child(self, epoch: int, claim_until: float) -> None:
        if self._child is not None:
            self._child.stop(graceful=False)
            self._start_child(epoch, claim_until)

    def stand_by(self) -> None:
        """A slave: keep a warm standby behind its closed gate, if this node may serve."""
        config = self._config
        eligible = config.exec_warm_standby and config.node_priority is not Priority.NEVER
        if self._child is not None and eligible:
            self._child.stand_by(self._node_environment())

    def child_ready(self) -> None:
        self.waiting_for = None

    def confirm_claim(self, until: float) -> None:
        """The child may live until ``until`` (the claim's end less the guardian's lead).

        A confirmation that comes after the guardian's last deadline has passed comes too
        late: the guardian has killed, or is killing, the child. That is right (nothing
        vouched for the claim in between), but it is this node's lateness, not the child's
        fault, and the operator is told so: one line per lapse."""
        if self._child is not None and until != self._claim_confirmed and until > float("-inf"):
            late_s = time.monotonic() - self._claim_confirmed
            if self._claim_confirmed > float("-inf") and late_s > 0:
                log.warning(
                    "%s node %s confirmed its exec child's claim %.0f ms after the guardian's "
                    "deadline: the guardian kills the child; this host delays the node's lease "
                    "checks (keepalive %d ms)",
                    codes.CLAIM_CONFIRMED_LATE,
                    self._config.node_id,
                    late_s * 1000,
                    self._config.lock_keep_alive_period_ms,
                )
            self._claim_confirmed = until
            self._child.confirm_claim(until)

    def run_pre_promote(self, epoch: int) -> None:
        """Start the ``pre_promote`` command; it posts ``PrePromoteDone``."""
        assert self._config.pre_promote is not None
        environment = self._epoch_environment(epoch)
        timeout_s = self._config.pre_promote_timeout_s
        run_pre_promote(
            self._config.pre_promote, timeout_s, epoch, environment, self._post, self._deaths
        )

    def stop(self, graceful: bool, then: Callable[[], None]) -> None:
        """Close every connection at once; stop the child's tree, then call ``then``."""
        self.waiting_for = None
        broker, self._broker = self._broker, None
        if broker is not None:
            broker.stop()
        if self._child is not None:
            self._child.stop(graceful=graceful, then=then)
        else:
            then()

    def broker_stats(self) -> dict[str, Any] | None:
        """For the stats thread: the serving broker's figures (read on the broker's own loop;
        a late or failed read gives the last ones, never an exception)."""
        broker = self._broker  # one read of a reference the loop replaces, never mutates
        return broker.stats() if broker is not None else None

    def close(self, timeout_s: float) -> bool:
        """At shutdown: stop everything, waiting for the child; False if it did not stop."""
        broker, self._broker = self._broker, None
        if broker is not None:
            broker.stop()
        return self._child is None or self._child.close(timeout_s)

    def _start_child(self, epoch: int, claim_until: float) -> None:
        if self._child is not None:
            self._claim_confirmed = claim_until  # what its guardian starts with
            self.waiting_for = ready_wait(self._config)
            if self._config.exec_warm_standby:
                self._child.open(self._epoch_environment(epoch), epoch, claim_until)
            else:
                self._child.start(self._epoch_environment(epoch), claim_until)

    def _node_environment(self) -> dict[str, str]:
        """What every exec child is told; a standby learns its epoch from its gate."""
        return {"PRIMACY_NODE_ID": self._config.node_id, "PRIMACY_SHARE": self._share}

    def _epoch_environment(self, epoch: int) -> dict[str, str]:
        """What the exec child and the pre_promote command are told of the takeover."""
        return {"PRIMACY_EPOCH": str(epoch), **self._node_environment()}
