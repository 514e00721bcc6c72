"""Randomized fault trials on the ZooKeeper backend: a fresh group, ensemble faults, the checker.

Faults of the coordination service: a session expired, a server killed, quorum
lost, a node cut off, and a stranger: a client without the group's credentials
that tries to take the group apart (issue 42).

The counterpart of ``tests/harness/chaos.py`` (shared-storage faults on emulated
NFS hosts); ``bench/chaos.py --coordination zookeeper`` runs it. Trial ``n`` of a
run with seed ``S`` draws everything from ``random.Random(S + n)``. Each trial
runs a 2- or 3-node group on a local share, every node reaching the ensemble
through proxies of its own, two producers and a consumer, and one to three
faults at random times, each ended before the next. The ensemble is the run's,
so trials run one at a time: a quorum lost is lost for every group on it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError

from primacy.cli.localgroup import Group
from tests.harness.chaos import TrialResult, run_faults, trial_loopback_address
from tests.harness.checker import check
from tests.harness.group import MasterPoller
from tests.harness.traffic import Traffic
from tests.harness.zookeeper import Ensemble
from tests.harness.zookeeper_group import SESSION_TIMEOUT_MS, ZooKeeperGroup

SESSION_S = SESSION_TIMEOUT_MS / 1000
_RECOVERY_S = 60.0
Fault = Callable[[ZooKeeperGroup, Ensemble, random.Random], None]


def _freeze(hold_s: tuple[float, float]) -> Fault:
    def inject(group: ZooKeeperGroup, ensemble: Ensemble, rng: random.Random) -> None:
        with group.wait_until_serving_again(_RECOVERY_S).stopped():
            time.sleep(rng.uniform(*hold_s))

    return inject


def _partition(hold_s: tuple[float, float]) -> Fault:
    def inject(group: ZooKeeperGroup, ensemble: Ensemble, rng: random.Random) -> None:
        master = group.wait_until_serving_again(_RECOVERY_S)
        group.cut(master)
        try:
            time.sleep(rng.uniform(*hold_s))
        finally:
            group.heal(master)

    return inject


def _servers_killed(count: int) -> Fault:
    def inject(group: ZooKeeperGroup, ensemble: Ensemble, rng: random.Random) -> None:
        killed = rng.sample(ensemble.servers, count)
        try:
            for server in killed:
                ensemble.kill(server)
            time.sleep(rng.uniform(0.5, 3.0))
        finally:
            for server in killed:
                ensemble.start(server)
            ensemble.wait_quorum()

    return inject


def _stranger(group: ZooKeeperGroup, ensemble: Ensemble, rng: random.Random) -> None:
    """An unauthenticated client on the ensemble's plaintext port does what found the holes:
    deletes the lock, plants the next epochs, writes ``paused``, resets the counter. Each must
    be refused (NoAuth); one that goes through fails the trial."""
    group.wait_until_serving_again(_RECOVERY_S)
    path = group.path
    stranger = KazooClient(hosts=ensemble.plain_hosts, timeout=5)
    stranger.start(timeout=30)
    try:
        latest = stranger.get(f"{path}/epoch")[1].version
        attempts: list[tuple[str, Callable[[], object]]] = [
            ("delete the lock", lambda: stranger.delete(f"{path}/lock")),
            ("write paused", lambda: stranger.create(f"{path}/paused", b"{}")),
            ("delete the counter", lambda: stranger.delete(f"{path}/epoch")),
            ("set the counter", lambda: stranger.set(f"{path}/epoch", b"0")),
        ]
        attempts += [
            (f"plant epochs/{n}", lambda n=n: stranger.create(f"{path}/epochs/{n}", b"{}"))
            for n in range(latest + 1, latest + 6)
        ]
        rng.shuffle(attempts)
        for what, attempt in attempts:
            try:
                attempt()
            except NoAuthError:
                continue
            except KazooException:
                continue  # e.g. no lock at this instant: nothing was written either
            raise AssertionError(f"a client without credentials could {what}")
        time.sleep(rng.uniform(0.2, 1.0))
    finally:
        stranger.stop()
        stranger.close()


FAULTS: dict[str, Fault] = {
    "session expiry (master frozen past its session)": _freeze((SESSION_S * 1.3, SESSION_S * 2)),
    "short freeze": _freeze((0.05, 0.5)),
    "one server killed": _servers_killed(1),
    "quorum lost": _servers_killed(2),
    "partition past the session": _partition((SESSION_S * 1.3, SESSION_S * 2)),
    "short partition": _partition((0.05, 1.0)),
    "stranger": _stranger,
}


def faults_on(ensemble: Ensemble) -> dict[str, Callable[[ZooKeeperGroup, random.Random], None]]:
    """``FAULTS`` bound to the run's ensemble, as ``run_faults`` takes them."""
    return {
        name: lambda group, rng, fault=fault: fault(group, ensemble, rng)  # type: ignore[misc]
        for name, fault in FAULTS.items()
    }


def run_trial(
    seed: int, workdir: Path, ensemble: Ensemble, fault: str | None = None
) -> TrialResult:
    """One trial with everything drawn from ``seed``; never leaves a process behind.
    ``fault``: inject only this kind (a key of ``FAULTS``), still at random times."""
    rng = random.Random(seed)
    result = TrialResult(seed, rng.choice([2, 3]), [])
    share = workdir / "share"
    share.mkdir(parents=True)
    group = Group(share=share, log_dir=workdir)
    nodes: ZooKeeperGroup | None = None
    try:
        nodes = ZooKeeperGroup(
            group, ensemble, result.nodes, proxied=True, stomp_host=trial_loopback_address(seed)
        )
        with MasterPoller(nodes.nodes.values()) as poller, Traffic(nodes.url, 2) as traffic:
            try:
                run_faults(nodes, faults_on(ensemble), traffic, rng, result, fault)
            except AssertionError as error:  # a wait timed out: report, still judge the rest
                result.error = str(error)
        result.verdict = check(traffic, share, poller)
    except Exception as error:
        result.error = f"{type(error).__name__}: {error}"
    finally:
        group.close()
        if nodes is not None:
            nodes.close()
        ensemble.start()  # a fault's restart that an error cut short
        ensemble.wait_quorum()
    return result
