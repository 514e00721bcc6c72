"""What a master serves: the built-in STOMP connector and the exec child, started and stopped.

Used on the role loop only (its one owner). Nothing here blocks: binding the
listener is immediate, closing it aborts every connection at once, and the
child is started and stopped by its own thread (``ChildControl``), which runs
the lock's release only once the child's tree is dead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from primacy.broker.service import BrokerService
from primacy.broker.users import UsersFileError
from primacy.store.journal import JournalStore
from primacy.supervisor import codes, roles
from primacy.supervisor.child_control import ChildControl
from primacy.supervisor.children import ChildProcess
from primacy.supervisor.config import NodeConfig, parse_host_port

log = logging.getLogger("primacy.node")


class Serving:
    """The connector and the child of one node; ``start`` when master, ``stop`` on demotion."""

    def __init__(self, config: NodeConfig, post: Callable[[roles.Event], None]) -> None:
        self._config = config
        self._post = post
        self._broker: BrokerService | None = None
        self._child = (
            ChildControl(ChildProcess(config.exec, config.exec_stop_grace_ms / 1000), post)
            if config.exec
            else None
        )

    def start_threads(self) -> None:
        if self._child is not None:
            self._child.start_thread()

    @property
    def serving(self) -> bool:
        return self._broker is not None

    def start(self, epoch: int, store: JournalStore | None) -> str | None:
        """Start the connector, then the child; why serving could not start, or None."""
        stomp = self._config.stomp
        if stomp is not None and store is not None:
            host, port = parse_host_port(stomp)
            service = BrokerService(store, host, port, self._config.broker_config())
            service.on_fatal = lambda reason: self._post(
                roles.LeaseLost(f"the journal failed: {reason}")
            )
            try:
                service.start()
            except OSError as exc:
                log.error(
                    "%s node %s cannot listen for STOMP on %s (%s); stepping down",
                    codes.SERVING_NOT_STARTED,
                    self._config.node_id,
                    stomp,
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
        self._start_child(epoch)
        return None

    def restart_child(self, epoch: int) -> None:
        if self._child is not None:
            self._child.stop(graceful=False)
            self._start_child(epoch)

    def stop(self, graceful: bool, then: Callable[[], None]) -> None:
        """Close every connection at once; stop the child's tree, then call ``then``."""
        broker, self._broker = self._broker, None
        if broker is not None:
            broker.stop()
        if self._child is not None:
            self._child.stop(graceful=graceful, then=then)
        else:
            then()

    def broker_stats(self) -> dict[str, Any] | None:
        """For the registry thread: the serving broker's figures (its stats are thread-safe)."""
        broker = self._broker  # one read of a reference the loop replaces, never mutates
        return broker.stats() if broker is not None else None

    def close(self, timeout_s: float) -> bool:
        """At shutdown: stop everything, waiting for the child; False if it did not stop."""
        broker, self._broker = self._broker, None
        if broker is not None:
            broker.stop()
        return self._child is None or self._child.close(timeout_s)

    def _start_child(self, epoch: int) -> None:
        if self._child is not None:
            self._child.start(
                {
                    "PRIMACY_EPOCH": str(epoch),
                    "PRIMACY_NODE_ID": self._config.node_id,
                    "PRIMACY_SHARE": str(Path(self._config.share).resolve()),
                }
            )
