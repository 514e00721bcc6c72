"""Real ``primacy run`` nodes coordinating through a real three-server ZooKeeper ensemble.

Each scenario ends with the checker (``tests/harness/checker.py``): every
acknowledged message consumed, no id stored twice, nothing acknowledged past a
fence, never two nodes answering 200 on ``/master`` for overlapping instants.
The journal stays on the share; only the lock and the epochs are on ZooKeeper.
"""

from __future__ import annotations

import json
import signal
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE

from primacy.cli.localgroup import Group, NodeProcess
from tests.harness.checker import assert_ok, check
from tests.harness.cli import primacy
from tests.harness.group import MasterPoller, wait_until
from tests.harness.traffic import Traffic
from tests.harness.zookeeper import Ensemble, running_ensemble, unavailable_reason
from tests.harness.zookeeper_group import ZooKeeperGroup, stranger_client

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

_ACKS_PER_PHASE = 15
_PHASE_TIMEOUT_S = 30.0
_MASTER_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    """This module's own ensemble: its tests kill servers."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with running_ensemble(tmp_path_factory.mktemp("zookeeper")) as started:
        yield started


@pytest.fixture
def restored(ensemble: Ensemble) -> Iterator[Ensemble]:
    """The ensemble, every server running again (and in its quorum) after the test."""
    yield ensemble
    ensemble.start()
    ensemble.wait_quorum()


def _acknowledged_more(traffic: Traffic, what: str) -> None:
    assert traffic.wait_for_acknowledged(_ACKS_PER_PHASE, _PHASE_TIMEOUT_S), (
        f"no {_ACKS_PER_PHASE} more receipts {what}; client saw {traffic.failover_reasons[-3:]}"
    )


def _session_state(node: NodeProcess) -> str | None:
    """The node's ZooKeeper session as ``/status`` shows it."""
    with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/status", timeout=2) as answer:
        return json.load(answer).get("coordination_session")  # type: ignore[no-any-return]


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["sigkill", "sigstop"])
def test_a_master_killed_or_frozen_is_replaced_once_its_session_expires(
    group: Group, share: Path, ensemble: Ensemble, how: signal.Signals
) -> None:
    nodes = ZooKeeperGroup(group, ensemble)
    old = nodes.nodes["n1"]
    assert _session_state(old) == "connected"
    with MasterPoller(nodes.nodes.values()) as poller, Traffic(nodes.url, 2) as traffic:
        _acknowledged_more(traffic, "before the fault")
        old.signal(how)
        new = group.wait_for_master(_MASTER_TIMEOUT_S, exclude={"n1"})
        _acknowledged_more(traffic, "from the new master")
        if how is signal.SIGSTOP:
            # Thawed: its session expired meanwhile, and its claim with it.
            old.signal(signal.SIGCONT)
            wait_until(lambda: old.status("/slave") == 200, 30, "the thawed master a slave")
            _acknowledged_more(traffic, "after the thaw")
            assert group.masters() == [new]
    assert_ok(check(traffic, share, poller))
    _the_cli_reads_the_group_from_zookeeper(nodes, ensemble, new.node_id)


def _the_cli_reads_the_group_from_zookeeper(
    nodes: ZooKeeperGroup, ensemble: Ensemble, master: str
) -> None:
    """``primacy status`` and ``cluster`` on a ZooKeeper group read its znodes, not the share
    (which holds no lock or epoch of such a group), and a path no group used is an error."""
    # Readers need no credentials (the group's znodes are world-readable), only TLS.
    where = ("--zookeeper", ensemble.hosts, "--zookeeper-path", nodes.path, *ensemble.tls_args())
    status = primacy("status", *where)
    assert status.returncode == 0, status.stderr
    assert f"lock: held by {master}" in status.stdout
    assert f"{master:<16} master" in status.stdout
    cluster = primacy("cluster", *where, "--json")
    assert cluster.returncode == 0, cluster.stderr
    listed = {entry["node_id"] for entry in json.loads(cluster.stdout)}
    assert master in listed and listed <= set(nodes.nodes)
    unused = (
        "--zookeeper",
        ensemble.hosts,
        "--zookeeper-path",
        nodes.path + "-unused",
        *ensemble.tls_args(),
    )
    for command in ("status", "cluster"):
        refused = primacy(command, *unused)
        assert refused.returncode != 0
        assert f"no primacy group has used {nodes.path}-unused" in refused.stderr


def test_a_master_cut_from_zookeeper_stops_while_its_share_stays_reachable(
    group: Group, share: Path, ensemble: Ensemble
) -> None:
    nodes = ZooKeeperGroup(group, ensemble, proxied=True)
    try:
        old = nodes.nodes["n1"]
        with MasterPoller(nodes.nodes.values()) as poller, Traffic(nodes.url, 2) as traffic:
            _acknowledged_more(traffic, "before the cut")
            nodes.cut(old)
            # It can still write its journal on the share, but no lease check passes: it
            # stops within its keepalive, and n2 takes over once the ensemble expires it.
            new = group.wait_for_master(_MASTER_TIMEOUT_S, exclude={"n1"})
            assert new.node_id == "n2"
            _acknowledged_more(traffic, "from the new master")
            nodes.heal(old)
            wait_until(lambda: _session_state(old) == "connected", 30, "n1 connected again")
            wait_until(lambda: old.status("/slave") == 200, 30, "n1 a slave")
            _acknowledged_more(traffic, "after the heal")
        assert "PRIMACY-1003" in old.log()  # the lease lost, the node demoted
        assert_ok(check(traffic, share, poller))
    finally:
        nodes.close()


def test_the_group_keeps_a_master_through_one_server_killed(
    group: Group, share: Path, restored: Ensemble
) -> None:
    nodes = ZooKeeperGroup(group, restored)
    with MasterPoller(nodes.nodes.values()) as poller, Traffic(nodes.url, 2) as traffic:
        _acknowledged_more(traffic, "before the kill")
        restored.kill(restored.servers[0])
        group.wait_for_master(_MASTER_TIMEOUT_S)
        _acknowledged_more(traffic, "with two servers of three")
    assert_ok(check(traffic, share, poller))


def test_without_a_quorum_no_master_and_a_master_again_once_it_is_back(
    group: Group, share: Path, restored: Ensemble
) -> None:
    nodes = ZooKeeperGroup(group, restored)
    with MasterPoller(nodes.nodes.values()) as poller, Traffic(nodes.url, 2) as traffic:
        _acknowledged_more(traffic, "before the quorum is lost")
        for server in restored.servers[:2]:
            restored.kill(server)
        # No lease check can pass: the master stops within its keepalive, and no one
        # takes its place while the ensemble has no quorum.
        wait_until(lambda: not group.masters(), 30, "no master without a quorum")
        assert all(node.status("/master") == 503 for node in nodes.nodes.values())
        for server in restored.servers[:2]:
            restored.start(server)
        restored.wait_quorum()
        group.wait_for_master(_MASTER_TIMEOUT_S)
        _acknowledged_more(traffic, "once the quorum is back")
    assert_ok(check(traffic, share, poller))


def _master_epoch(node: NodeProcess) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/status", timeout=2) as answer:
        epoch = json.load(answer)["epoch"]
    assert isinstance(epoch, int)
    return epoch


def test_a_client_without_credentials_is_refused_while_the_master_serves(
    group: Group, share: Path, ensemble: Ensemble
) -> None:
    """Issue 42, finding 2: on 173b3ec a client with no credentials deleted the master's lock
    (a failover each time), planted the next epochs (no master could claim), wrote ``paused``.
    Now each is refused (NoAuth) and the master serves on in the same epoch."""
    nodes = ZooKeeperGroup(group, ensemble)
    master, path = nodes.nodes["n1"], nodes.path
    with MasterPoller(nodes.nodes.values()) as poller, Traffic(nodes.url, 2) as traffic:
        _acknowledged_more(traffic, "before the stranger")
        epoch = _master_epoch(master)
        stranger = stranger_client(ensemble)  # the plaintext port, no credentials
        try:
            latest = stranger.get(f"{path}/epoch")[1].version  # the group is world-readable
            attempts: list[tuple[str, Callable[[], object]]] = [
                ("delete the lock", lambda: stranger.delete(f"{path}/lock")),
                ("write paused", lambda: stranger.create(f"{path}/paused", b"{}")),
                ("reset the counter", lambda: stranger.set(f"{path}/epoch", b"0")),
                ("delete the counter", lambda: stranger.delete(f"{path}/epoch")),
                ("open the counter", lambda: stranger.set_acls(f"{path}/epoch", OPEN_ACL_UNSAFE)),
            ]
            attempts += [
                (f"plant epochs/{n}", lambda n=n: stranger.create(f"{path}/epochs/{n}", b"{}"))
                for n in range(latest + 1, latest + 6)
            ]
            for _ in range(3):  # three rounds, as the finding deleted the lock three times
                for what, attempt in attempts:
                    with pytest.raises(NoAuthError):
                        attempt()
                        pytest.fail(f"a client without credentials could {what}")
                _acknowledged_more(traffic, "while the stranger tries")
            assert stranger.exists(f"{path}/paused") is None
            assert stranger.get(f"{path}/epoch")[1].version == latest
        finally:
            stranger.stop()
            stranger.close()
        _acknowledged_more(traffic, "after the stranger")
        assert group.masters() == [master]
        assert _master_epoch(master) == epoch
        assert all(
            node.status("/slave") == 200 for node in nodes.nodes.values() if node is not master
        )
    assert_ok(check(traffic, share, poller))
