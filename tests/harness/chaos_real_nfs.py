"""Randomized fault trials on the real NFSv4 server (issue 29): ganesha, libnfs hosts, checker.

The real tier's counterpart of ``tests/harness/chaos.py`` (same results, same
replay by seed): each trial starts its own ganesha (lease 4 s, graceless) in
its own network namespace, a 2- or 3-node group with the nfs4 profile's
timings on hosts behind links the trial can cut, two producers and a
consumer, and one or two of the faults below at random times, each ended
before the next; then the checker.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

from primacy.nfs_profiles.profiles import load_profile
from tests.harness.chaos import TrialResult, trial_loopback_address
from tests.harness.checker import check
from tests.harness.emulated_group import EmulatedGroup
from tests.harness.ganesha.host import RealNfsHosts
from tests.harness.ganesha.server import GaneshaServer
from tests.harness.group import MasterPoller
from tests.harness.traffic import Traffic


def nfs4_profile_arguments() -> tuple[str, ...]:
    """The nfs4 profile's lock method and timings (nfs_profiles/nfs4.toml) as node flags: what
    an operator following ``primacy doctor`` runs, read from the profile itself."""
    profile = load_profile("nfs4")
    timings = profile.timings
    return (
        "--lock-method",
        profile.lock_method,
        "--lock-keep-alive-period-ms",
        str(timings.lock_keep_alive_period_ms),
        "--lock-acquire-sleep-interval-ms",
        str(timings.lock_acquire_sleep_interval_ms),
        "--stall-takeover-ms",
        str(timings.stall_takeover_ms),
    )


NFS4_PROFILE = nfs4_profile_arguments()
_RECOVERY_S = 90.0  # a lease, a takeover and a loaded machine


def _master(group: EmulatedGroup) -> str:
    return group.wait_for_master(_RECOVERY_S).node_id


def _cut(hold_s: tuple[float, float]) -> Callable[[EmulatedGroup, random.Random, int], None]:
    def inject(group: EmulatedGroup, rng: random.Random, lease_s: int) -> None:
        host = group.host_of(group.nodes[_master(group)])
        host.partition()
        try:
            time.sleep(rng.uniform(*hold_s) * lease_s)
        finally:
            host.heal()

    return inject


def _freeze_client(group: EmulatedGroup, rng: random.Random, lease_s: int) -> None:
    host = group.host_of(group.nodes[_master(group)])
    host.freeze()
    try:
        time.sleep(rng.uniform(1.2, 2.0) * lease_s)
    finally:
        host.thaw()


def _stop_supervisor(
    hold_s: tuple[float, float],
) -> Callable[[EmulatedGroup, random.Random, int], None]:
    """The master's supervisor stopped while its host renews its lock; past the profile's
    stall_takeover_ms a slave replaces the lock file, and the resumed master is fenced."""

    def inject(group: EmulatedGroup, rng: random.Random, lease_s: int) -> None:
        with group.nodes[_master(group)].stopped():
            time.sleep(rng.uniform(*hold_s))

    return inject


_STALL_S = load_profile("nfs4").timings.stall_takeover_ms / 1000


def _crash_host(group: EmulatedGroup, rng: random.Random, lease_s: int) -> None:
    """The master's host dies (client first, no unlock), then comes back and rejoins."""
    node = group.nodes[_master(group)]
    host = group.host_of(node)
    host.crash()
    node.signal(signal.SIGKILL)
    node.process.wait(timeout=30)
    group.wait_for_master(_RECOVERY_S, exclude={node.node_id})
    host.restart()
    group.stomp.start(node.node_id)


def _restart_server(group: EmulatedGroup, rng: random.Random, lease_s: int) -> None:
    group.emulated.server.restart(grace_s=0)


def _slow_server(group: EmulatedGroup, rng: random.Random, lease_s: int) -> None:
    host = group.host_of(group.nodes[_master(group)])
    host.slow_replies(rng.uniform(50, 200))
    try:
        time.sleep(rng.uniform(0.5, 1.0) * lease_s)
    finally:
        host.clear_faults()


REAL_FAULTS: dict[str, Callable[[EmulatedGroup, random.Random, int], None]] = {
    "link cut past the lease": _cut((1.3, 2.0)),
    "short link cut": _cut((0.05, 0.3)),
    "client frozen past the lease": _freeze_client,
    "supervisor SIGSTOP": _stop_supervisor((2.0, 6.0)),
    "supervisor SIGSTOP past the stall": _stop_supervisor((_STALL_S + 2, _STALL_S + 6)),
    "host crash, then rejoin": _crash_host,
    "server restart (graceless)": _restart_server,
    "slow server": _slow_server,
}


def run_real_trial(seed: int, workdir: Path, fault: str | None = None) -> TrialResult:
    """One trial on its own ganesha; never leaves a process, mount or namespace behind."""
    rng = random.Random(seed)
    result = TrialResult(seed, rng.choice([2, 3]), [])
    workdir.mkdir(parents=True, exist_ok=True)
    server = GaneshaServer.start(workdir)
    hosts = RealNfsHosts(workdir, server)
    try:
        group = EmulatedGroup(
            hosts, result.nodes, extra=NFS4_PROFILE, stomp_host=trial_loopback_address(seed)
        )
        with MasterPoller(group.nodes.values()) as poller, Traffic(group.url, 2) as traffic:
            try:
                _run_faults(group, traffic, poller, rng, result, fault, server.lease_s)
            except AssertionError as error:  # a wait timed out: report, still judge the rest
                result.error = str(error)
        result.verdict = check(traffic, group.backing, poller)
    except Exception as error:
        result.error = f"{type(error).__name__}: {error}"
    finally:
        hosts.close()
        server.close()
    return result


def _run_faults(
    group: EmulatedGroup,
    traffic: Traffic,
    poller: MasterPoller,
    rng: random.Random,
    result: TrialResult,
    fault: str | None,
    lease_s: int,
) -> None:
    polled = {node.pid for node in group.nodes.values()}
    if not traffic.wait_for_acknowledged(10, _RECOVERY_S):
        raise AssertionError("no traffic acknowledged before the first fault")
    for _ in range(rng.randint(1, 2)):
        time.sleep(rng.uniform(0.0, 1.0))
        name = rng.choice(sorted(REAL_FAULTS))
        name = fault or name  # drawn either way: a trial's other draws stay as they were
        result.faults.append(name)
        REAL_FAULTS[name](group, rng, lease_s)
        for node in group.nodes.values():
            if node.pid not in polled:  # a crashed host's node, restarted
                poller.add(node)
                polled.add(node.pid)
        group.wait_until_serving_again(_RECOVERY_S)
    if not traffic.wait_for_acknowledged(10, _RECOVERY_S):
        raise AssertionError(f"no traffic acknowledged after {result.faults}")
