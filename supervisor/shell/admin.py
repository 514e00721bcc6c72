"""What the admin endpoints do to a node: switchover, pause, resume, priority.

Acts only by posting events to the role loop and running share writes on the
admin I/O worker (not the lease's: a durable write must never delay a lease check);
it reads the node through its published snapshot.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import FastAPI

from primacy.api.admin import AdminRefused
from primacy.api.server import ApiServer
from primacy.api.snapshot import StatusSnapshot
from primacy.broker.admission import Budget, Networks
from primacy.broker.tls import ServerTls
from primacy.share.port import SharePort
from primacy.share.records import SWITCHOVER_TIMEOUT_S, NodeEntry, PauseMarker, Switchover
from primacy.supervisor import codes
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.machine import roles
from primacy.supervisor.machine.roles import Priority

log = logging.getLogger("primacy.admin")
T = TypeVar("T")
RunOnShare = Callable[[Callable[[], T]], T]


class NodeAdmin:
    """The supervisor's implementation of ``api.admin.AdminActions``."""

    def __init__(
        self,
        node_id: str,
        port: SharePort,
        snapshot: Callable[[], StatusSnapshot],
        post: Callable[[roles.Event], None],
        run_on_share: Callable[[Callable[[], Any]], Any],
    ) -> None:
        self._node_id = node_id
        self._port = port
        self._snapshot = snapshot
        self._post = post
        self._run_on_share = run_on_share

    def switchover(self, to: str | None) -> dict[str, Any]:
        current = self._snapshot()
        if not current.is_serving_master():
            raise AdminRefused(
                f"node {self._node_id} is not the serving master; send the switchover to the "
                "master (GET /cluster shows it)"
            )
        if current.paused:
            raise AdminRefused("the group is paused; resume it before a switchover")
        # The group as the share lists it now, not as the last registry refresh read it: right
        # after a takeover the snapshot may not list a slave that registered a moment ago.
        entries: list[NodeEntry] = self._run_on_share(self._port.node_entries)
        chosen = self._choose_target(entries, to)
        target = chosen.node_id
        assert current.epoch is not None
        request = Switchover(
            self._node_id, target, current.epoch, time.time() + SWITCHOVER_TIMEOUT_S
        )
        self._run_on_share(lambda: self._port.request_switchover(request))
        log.info(
            "%s switchover from %s to %s requested (epoch %d)",
            codes.SWITCHOVER_REQUESTED,
            self._node_id,
            target,
            current.epoch,
        )
        self._post(roles.StepDownRequested(f"switchover to {target}"))
        return {"from": self._node_id, "to": target, "to_http": chosen.http, "epoch": current.epoch}

    def pause(self) -> None:
        marker = PauseMarker(self._node_id, time.time())
        self._run_on_share(lambda: self._port.pause(marker))
        log.info("%s group paused by an admin request to %s", codes.GROUP_PAUSED, self._node_id)
        self._post(roles.PauseChanged(True))

    def resume(self) -> None:
        self._run_on_share(self._port.resume)
        log.info("%s group resumed by an admin request to %s", codes.GROUP_RESUMED, self._node_id)
        self._post(roles.PauseChanged(False))

    def set_priority(self, priority: str) -> None:
        log.info(
            "%s node %s priority set to %s (until restart; edit the config file to keep it)",
            codes.PRIORITY_SET,
            self._node_id,
            priority,
        )
        self._post(roles.PriorityChanged(Priority[priority.upper()]))

    def _choose_target(self, entries: list[NodeEntry], wanted: str | None) -> NodeEntry:
        now = time.time()
        candidates = [
            m
            for m in entries
            if m.node_id != self._node_id
            and m.is_live(now)
            and m.role == "slave"
            and Priority.of_entry(m.priority) != Priority.NEVER
        ]
        if wanted is not None:
            if wanted == self._node_id:
                raise AdminRefused(f"node {wanted} is already the master")
            named = [m for m in candidates if m.node_id == wanted]
            if not named:
                raise AdminRefused(
                    f"node {wanted} is not a live slave that may become master; GET /cluster "
                    "lists the candidates"
                )
            return named[0]
        if not candidates:
            raise AdminRefused("no live slave can take over (all gone, or priority never)")
        return max(candidates, key=lambda m: (Priority.of_entry(m.priority), _reverse(m.node_id)))


def _reverse(text: str) -> tuple[int, ...]:
    """Sort key that puts the alphabetically first name last under max()."""
    return tuple(-ord(char) for char in text)


def status_endpoint(
    config: NodeConfig,
    app: FastAPI,
    on_thread_death: Callable[[str, BaseException], None] | None = None,
) -> ApiServer:
    """The node's HTTP endpoint on ``http``, over TLS when ``http_tls_cert`` is set, admitting
    connections by network as the STOMP listener does; ``on_thread_death`` hears of an
    exception that ends its thread."""
    host, port = config.http_host_port
    tls = (
        ServerTls(config.http_tls_cert, config.http_tls_key, config.http_tls_ca).context
        if config.http_tls_cert is not None and config.http_tls_key is not None
        else None
    )
    networks = Networks(config.network_prefix_ipv4, config.network_prefix_ipv6)
    admission: Budget[object] = Budget(
        config.http_max_connections, config.http_max_connections_per_network, networks
    )
    return ApiServer(app, host, port, admission, tls, on_thread_death)
