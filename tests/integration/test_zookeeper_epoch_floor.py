"""Issue 42, finding 1, on real nodes: a ZooKeeper epoch counter set back does not make receipted
messages vanish.

The client playing the stranger writes the group's znodes as it likes (a member of primacy's
identity gone rogue, or the ensemble restored from an old backup: ACLs do not help there).
It claims an epoch (the group moves past it), then, after a producer got its receipts from
the next master, deletes the epoch znodes, sets the counter back and deletes the lock. On
173b3ec the next master claimed the reused number, set the served segment aside as
"unclaimed" and served without it: the consumer got 0 of 20. Now no node claims below what
the share's journal shows, every node says why, and once an operator raises the counter
(`primacy epochs raise`) a master serves all 20.
"""

from __future__ import annotations

import contextlib
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from primacy.cli.localgroup import Group, NodeProcess
from primacy.share.layout import journal_dir
from primacy.share.records import EpochRecord
from tests.broker.stomppy import StompPy
from tests.harness.cli import primacy
from tests.harness.group import wait_until
from tests.harness.zookeeper import Ensemble
from tests.harness.zookeeper_group import ZooKeeperGroup, stranger_client

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

_MESSAGES = 20
_TIMEOUT_S = 30.0


def _status(node: NodeProcess) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/status", timeout=2) as answer:
        return json.load(answer)  # type: ignore[no-any-return]


def _serving_epoch(nodes: ZooKeeperGroup) -> tuple[NodeProcess, int] | None:
    for node in nodes.nodes.values():
        if node.status("/master") == 200:
            epoch = _status(node)["epoch"]
            assert isinstance(epoch, int)
            return node, epoch
    return None


def _wait_for_master_past(nodes: ZooKeeperGroup, epoch: int) -> NodeProcess:
    found: list[NodeProcess] = []

    def serving() -> bool:
        seen = _serving_epoch(nodes)
        if seen is not None and seen[1] > epoch:
            found.append(seen[0])
        return bool(found)

    wait_until(serving, _TIMEOUT_S, f"a master past epoch {epoch}")
    return found[0]


def _stomp(nodes: ZooKeeperGroup, node: NodeProcess) -> StompPy:
    return StompPy(("127.0.0.1", nodes.stomp.stomp.ports[node.node_id]))


@pytest.fixture
def stranger(zookeeper_ensemble: Ensemble) -> Iterator[KazooClient]:
    client = stranger_client(zookeeper_ensemble, authenticated=True)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def test_a_counter_set_back_loses_no_receipted_message(
    group: Group, share: Path, zookeeper_ensemble: Ensemble, stranger: KazooClient
) -> None:
    nodes = ZooKeeperGroup(group, zookeeper_ensemble)
    path = nodes.path
    served = _serving_epoch(nodes)
    assert served is not None
    # 1 on a quiet machine; on a loaded one the first master may lose a claim or two first.
    first = served[1]

    # The stranger claims the next epoch as a node would: the master of ``first`` fails its check.
    record = EpochRecord.claim("stranger", None, 250, False).numbered(first + 1).to_bytes()
    counter_version = stranger.get(f"{path}/epoch")[1].version
    transaction = stranger.transaction()
    transaction.set_data(f"{path}/epoch", str(first + 1).encode(), version=counter_version)
    transaction.create(f"{path}/epochs/{first + 1}", record)
    assert not any(isinstance(r, Exception) for r in transaction.commit())
    master = _wait_for_master_past(nodes, first + 1)
    epoch = _status(master)["epoch"]
    assert epoch > first + 1

    producer = _stomp(nodes, master)
    try:
        for number in range(_MESSAGES):
            assert producer.send("/queue/floor", f"m{number}", **{"message-id": f"floor-{number}"})
    finally:
        producer.close()

    # Back to 1: the epoch znodes go, the counter is recreated at version 1, the lock goes.
    for child in stranger.get_children(f"{path}/epochs"):
        stranger.delete(f"{path}/epochs/{child}")
    stranger.delete(f"{path}/epoch")
    stranger.create(f"{path}/epoch", b"0")
    stranger.set(f"{path}/epoch", b"1", version=0)
    # The master may have let the lock go by itself: its check found no counter a moment ago.
    with contextlib.suppress(NoNodeError):
        stranger.delete(f"{path}/lock")

    # Nobody claims 2 again: every node that takes the lock refuses and says why.
    wait_until(
        lambda: all(_status(n)["coordinator_behind_share"] for n in nodes.nodes.values()),
        _TIMEOUT_S,
        "every node to refuse a claim below the share's journal",
    )
    assert group.masters() == []
    assert stranger.get(f"{path}/epoch")[1].version == 1  # no claim went through
    segments = [p.name for p in journal_dir(share).iterdir() if p.name.endswith(".seg")]
    assert any(name.startswith(f"{epoch:010d}-") for name in segments), segments
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{master.port}/metrics", timeout=2).read()
    assert b"primacy_coordinator_behind_share 1.0" in metrics
    assert "PRIMACY-1026" in master.log_path.read_text()

    # The operator's repair: the counter up to what the journal shows.
    raised = primacy(
        "epochs",
        "raise",
        str(share),
        *("--zookeeper", zookeeper_ensemble.hosts, "--zookeeper-path", path),
        *("--zookeeper-credentials-file", str(zookeeper_ensemble.credentials_file)),
        *zookeeper_ensemble.tls_args(),
    )
    assert raised.returncode == 0, raised.stderr
    reached = re.search(r"the counter is at (\d+)", raised.stdout)
    assert reached is not None and int(reached.group(1)) >= epoch, raised.stdout  # 3 when quiet

    new = _wait_for_master_past(nodes, int(reached.group(1)))
    consumer = _stomp(nodes, new)
    try:
        consumer.subscribe("/queue/floor", "s1", ack="client-individual")
        bodies = set()
        for _ in range(_MESSAGES):
            message = consumer.message(_TIMEOUT_S)
            bodies.add(message.body)
            consumer.connection.ack(message.headers["ack"])
        assert bodies == {f"m{number}" for number in range(_MESSAGES)}
    finally:
        consumer.close()
    wait_until(
        lambda: not any(_status(n)["coordinator_behind_share"] for n in nodes.nodes.values()),
        _TIMEOUT_S,
        "every node to see the claim past the floor",
    )
