"""The parts of a node, built and wired together: what ``Node`` (the role loop) owns.

``wire`` makes every part from the config and the loop's two entry points (``post``
for events, ``snapshot`` for the published view); ``start`` starts their threads in
order; ``close`` ends the ones that end after the lock is let go. The loop itself, and
every decision, stay in ``node.py``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from primacy.api.app import create_app
from primacy.api.metrics import NodeMetrics
from primacy.api.server import ApiServer
from primacy.api.snapshot import StatusSnapshot
from primacy.broker.tls import certificate_expiries
from primacy.share.port import ChangeWatch, SharePort
from primacy.supervisor import codes
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.machine import roles
from primacy.supervisor.shell import sdnotify
from primacy.supervisor.shell.admin import NodeAdmin, status_endpoint
from primacy.supervisor.shell.config_watch import ConfigWatcher
from primacy.supervisor.shell.coordination import open_share_port
from primacy.supervisor.shell.following import JournalFollowing
from primacy.supervisor.shell.lb_push import LoadBalancerPush
from primacy.supervisor.shell.lock_io import LockIoWorker
from primacy.supervisor.shell.node_events import ConfigEdited, NodeEvent, SessionChanged
from primacy.supervisor.shell.registry_loop import RegistryLoop
from primacy.supervisor.shell.serving import Serving
from primacy.supervisor.shell.share_jobs import Clock, ShareJobs
from primacy.supervisor.shell.thread_deaths import ThreadDeaths

log = logging.getLogger("primacy.node")

Post = Callable[[roles.Event | NodeEvent], None]


@dataclass
class NodeParts:
    """Every part of one node; each thread among them belongs to the node (``deaths``)."""

    deaths: ThreadDeaths
    io: LockIoWorker
    # The admin endpoints' share writes (a switchover's request, a pause marker), each
    # with an fsync: on a worker of their own, so a lease check never waits behind one
    # (issue 47: a switchover's durable write on a loaded disk made the check that keeps
    # the exec child's claim late, and the guardian killed the child mid-grace).
    admin_io: LockIoWorker
    serving: Serving
    notifier: sdnotify.Notifier
    metrics: NodeMetrics
    port: SharePort
    jobs: ShareJobs
    api: ApiServer
    config_watcher: ConfigWatcher | None
    registry: RegistryLoop
    watcher: ChangeWatch
    lb: LoadBalancerPush
    following: JournalFollowing


def wire(
    config: NodeConfig,
    clock: Clock,
    post: Post,
    snapshot: Callable[[], StatusSnapshot],
    admin_token: str | None = None,
    config_file: Path | None = None,
    reload_config: Callable[[], NodeConfig] | None = None,
    share_port: SharePort | None = None,
) -> NodeParts:
    """Build the node's parts; nothing is started (``start``)."""
    deaths = ThreadDeaths(config.node_id, post)
    io = LockIoWorker(post, deaths)
    admin_io = LockIoWorker(post, deaths, name="primacy-admin-io")
    serving = Serving(config, post, deaths)
    notifier = sdnotify.Notifier(watchdog_s=config.watchdog_timeout_s, stop_s=config.stop_timeout_s)
    metrics = NodeMetrics(
        snapshot,
        functools.partial(
            certificate_expiries, {"stomp": config.stomp_tls_cert, "http": config.http_tls_cert}
        ),
    )
    port = share_port or open_share_port(config, lambda state: post(SessionChanged(state)))
    following = JournalFollowing(config, deaths)
    jobs = ShareJobs(config, port, clock, metrics.observe_commit, following.follower)
    admin = NodeAdmin(config.node_id, port, snapshot, post, admin_io.call)
    api = status_endpoint(
        config, create_app(snapshot, metrics, admin, admin_token), on_thread_death=deaths.died
    )
    config_watcher = (
        ConfigWatcher(config_file, reload_config, lambda new: post(ConfigEdited(new)))
        if config_file is not None and reload_config is not None
        else None
    )
    registry = RegistryLoop(
        port,
        config.node_id,
        api.address,
        config.registry_refresh_ms / 1000,
        snapshot,
        serving.broker_stats,
        post,
        deaths,
    )
    watcher = port.watch(
        config.node_id,
        on_master_left=lambda: post(roles.MasterLeft()),
        on_pause_changed=registry.wake,
    )
    lb = LoadBalancerPush(config, lambda: snapshot().is_serving_master(), deaths)
    return NodeParts(
        deaths,
        io,
        admin_io,
        serving,
        notifier,
        metrics,
        port,
        jobs,
        api,
        config_watcher,
        registry,
        watcher,
        lb,
        following,
    )


def start(parts: NodeParts, config: NodeConfig) -> None:
    """Start every part's threads; ApiServerError (the HTTP listener) before any other."""
    parts.api.start()
    parts.registry.start()
    try:
        parts.watcher.start()
    except OSError as exc:  # inotify limits, or a filesystem without events
        log.warning(
            "%s share events unavailable (%s); slaves rely on polling",
            codes.SHARE_EVENTS_UNAVAILABLE,
            exc,
        )
    parts.serving.start_threads()
    parts.lb.start()
    parts.following.start()
    if parts.config_watcher is not None:
        parts.config_watcher.start()
    log.info(
        "%s node %s starting: share=%s http=%s priority=%s",
        codes.NODE_STARTED,
        config.node_id,
        config.share,
        parts.api.address,
        config.priority,
    )


def close_after_release(parts: NodeParts, timeout_s: float, released: bool) -> None:
    """After the lock is let go and the last snapshot published: the rest, in order."""
    if parts.config_watcher is not None:
        parts.config_watcher.stop()
    parts.following.close(timeout_s)
    parts.registry.close(timeout_s, final=released)  # its last entry wakes the slaves
    parts.lb.close(timeout_s)  # after the stop's "down" was sent (or failed)
    parts.watcher.stop()  # last: joining the observer takes a while and wakes no one
    parts.port.close()  # a coordination service's session ends after the release
    parts.api.stop()
    parts.admin_io.close(timeout_s)  # after the API: no admin request is left to run
    parts.notifier.close()
