"""The push to load balancers: each configured HAProxy is told at once when this node starts
or stops serving, so it does not wait for its next health check.

The role loop calls ``follow`` with what ``/master`` answers (never blocking: a push is
queued, not sent); one thread per HAProxy sends the latest wish, retries every second while
it cannot, and gives way to a newer wish. Nothing waits for a load balancer: a takeover,
a demotion and a stop go on whether or not one answers, and its health check, which a
push only overtakes, decides meanwhile (docs/safety.md, "Load balancers told by push").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from primacy.supervisor import codes
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.shell.haproxy_api import Refused, RuntimeApi, RuntimeApiError, commands
from primacy.supervisor.shell.thread_deaths import ThreadDeaths, owned_thread

log = logging.getLogger("primacy.node")

RETRY_S = 1.0
_RECHECK_S = 0.01


class _OneHaproxy:
    """The push to one HAProxy: its thread, the wish it has to send, what it last applied."""

    def __init__(
        self,
        api: RuntimeApi,
        config: NodeConfig,
        serving_now: Callable[[], bool],
        deaths: ThreadDeaths | None,
    ) -> None:
        self._api = api
        self._serving_now = serving_now
        self._node_id = config.node_id
        self._backend = config.haproxy_backend
        self._server = config.haproxy_server or config.node_id
        self._timeout_s = config.haproxy_timeout_ms / 1000
        self._changed = threading.Condition()
        self._wanted: bool | None = None  # serving or not; None until the loop says
        self._applied: bool | None = None
        self._failing: str | None = None  # the last failure logged, until a push succeeds
        self._failed_wish: bool | None = None  # what that failure was sending
        self._closing = False
        self._thread = owned_thread(deaths, self._run, f"haproxy-push {api.address}")

    def start(self) -> None:
        self._thread.start()

    def want(self, serving: bool) -> None:
        with self._changed:
            if self._wanted != serving:
                self._wanted = serving
                self._changed.notify()

    def close(self, timeout_s: float) -> None:
        """Send what is pending unless it is failing, then end (within ``timeout_s``)."""
        with self._changed:
            self._closing = True
            self._changed.notify()
        self._thread.join(timeout_s)

    def _next(self) -> bool | None:
        """The wish to send now, or None to end. After a failure the same wish waits a
        second; a new wish goes at once."""
        retry_at = time.monotonic() + RETRY_S if self._failing else 0.0
        failed_wish = self._failed_wish
        with self._changed:
            while True:
                pending = self._wanted is not None and self._wanted != self._applied
                if self._closing and (not pending or self._failing):
                    return None
                if pending and (time.monotonic() >= retry_at or self._wanted != failed_wish):
                    return self._wanted
                self._changed.wait(max(0.0, retry_at - time.monotonic()) if pending else None)

    def _run(self) -> None:
        while (serving := self._next()) is not None:
            if serving and not self._serving_now():
                # The claim lapsed since the loop asked (this node was frozen, say): no "up"
                # from a node that no longer answers 200 (sent once it does again, or never).
                if self._closing:
                    return
                time.sleep(_RECHECK_S)
                continue
            started = time.monotonic()
            try:
                servers = list(self._api.servers(self._backend, self._timeout_s)) if serving else []
                self._api.run(
                    commands(self._backend, self._server, serving, servers), self._timeout_s
                )
            except RuntimeApiError as exc:
                self._failed_wish = serving
                self._failed(serving, exc)
                continue
            with self._changed:
                self._applied = serving
            was_failing, self._failing = self._failing, None
            log.info(
                "%s node %s told HAProxy %s: %s in %.1f ms%s",
                codes.LB_TOLD,
                self._node_id,
                self._api.address,
                f"{self._backend}/{self._server} up, the backend's other servers down"
                if serving
                else f"{self._backend}/{self._server} down",
                (time.monotonic() - started) * 1000,
                " (reached again)" if was_failing else "",
            )

    def _failed(self, serving: bool, exc: RuntimeApiError) -> None:
        """Logged once per kind of failure; the retry comes a second later."""
        if str(exc) == self._failing:
            return
        self._failing = str(exc)
        what = "up" if serving else "down"
        if isinstance(exc, Refused):
            log.error(
                "%s node %s: HAProxy refused to mark %s/%s %s: %s; check haproxy_backend, "
                "haproxy_server and that the socket is at level admin (retried every second; "
                "its health check decides meanwhile)",
                codes.LB_REFUSED,
                self._node_id,
                self._backend,
                self._server,
                what,
                exc,
            )
        else:
            log.warning(
                "%s node %s could not tell HAProxy to mark %s/%s %s: %s (retried every second; "
                "its health check decides meanwhile)",
                codes.LB_UNREACHABLE,
                self._node_id,
                self._backend,
                self._server,
                what,
                exc,
            )


class LoadBalancerPush:
    """Every configured HAProxy of one node; ``follow`` from the role loop only."""

    def __init__(
        self,
        config: NodeConfig,
        serving_now: Callable[[], bool],
        deaths: ThreadDeaths | None = None,
    ) -> None:
        """``serving_now``: what ``/master`` answers at this instant (checked again just
        before an "up" is sent)."""
        self._haproxies = [
            _OneHaproxy(RuntimeApi(address), config, serving_now, deaths)
            for address in config.haproxy_runtime_apis()
        ]
        self._serving: bool | None = None

    def start(self) -> None:
        for haproxy in self._haproxies:
            haproxy.start()

    def follow(self, serving_now: bool, master: bool) -> None:
        """Tell every HAProxy: up once ``/master`` says 200 (``serving_now``); down once this
        node is no longer master (``master`` False). A claim that lapses and comes back while
        the node stays master (a late lease check on a loaded host) is left to HAProxy's
        checks, which tolerate it (``fall 2``): a "down" pushed for it would cut every
        client's session (``on-marked-down shutdown-sessions``). A successor marks this node
        down anyway before it marks itself up (docs/safety.md)."""
        serving = serving_now or (self._serving is True and master)
        if serving != self._serving:
            self._serving = serving
            for haproxy in self._haproxies:
                haproxy.want(serving)

    def close(self, timeout_s: float) -> None:
        for haproxy in self._haproxies:
            haproxy.close(timeout_s)
