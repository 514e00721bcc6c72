"""The epoch floor: nothing ZooKeeper says can lower an epoch the share proves was served.

On a real ensemble, a client with write access plays the stranger of issue 42 (a reset
counter, a planted epoch znode). ACLs keep strangers out (tests/integration/
test_zookeeper_stranger.py); these tests show what holds when one gets in anyway, or when a
backup of the ensemble is restored.
"""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from primacy.locker.lease import CoordinatorBehindShare, Lease, LeaseLost
from primacy.share.port import EpochCounterWentBack
from primacy.share.records import EpochRecord
from primacy.share.zookeeper import ZooKeeperShare
from tests.share.ports import Handles

pytestmark = [pytest.mark.zookeeper, pytest.mark.parametrize("share_kind", ["zookeeper"])]


def claim(port: ZooKeeperShare, node: str = "n1") -> int:
    return port.claim_epoch(EpochRecord.claim(node, None, 250, False))


def reset_counter(client: KazooClient, path: str, to: int) -> None:
    """What the stranger did: delete the counter, recreate it and set it until its version
    (the epoch) reads ``to``, data and version agreeing as a claim leaves them."""
    client.delete(f"{path}/epoch")
    client.create(f"{path}/epoch", b"0")
    for version in range(to):
        client.set(f"{path}/epoch", str(version + 1).encode(), version=version)


def test_a_master_whose_counter_went_back_fails_its_lease_check(handles: Handles) -> None:
    port = handles()
    assert isinstance(port, ZooKeeperShare)
    lease = Lease(port, "n1")
    assert lease.try_acquire()
    for _ in range(3):
        epoch = lease.claim_epoch(250)
    lease.revalidate()

    reset_counter(port.client, port.path, epoch - 2)
    # The check "was epoch+1 claimed?" would answer no: the master would stay current while
    # the next claimant gets epoch-1. The counter below its own claim is the proof it went back.
    with pytest.raises(LeaseLost, match="went back from 3 to 1"):
        lease.revalidate()
    with pytest.raises(EpochCounterWentBack):
        claim(port)


def test_no_claim_is_made_below_the_share_floor(handles: Handles) -> None:
    port = handles()
    assert isinstance(port, ZooKeeperShare)
    assert claim(port) == 1
    floors = [5]
    lease = Lease(handles(), "n2", lambda: floors[0])
    assert lease.try_acquire()
    with pytest.raises(CoordinatorBehindShare, match="no claim of epoch 5"):
        lease.claim_epoch(250)
    assert port.epoch_exists(1) and not port.epoch_exists(2)  # nothing was claimed

    floors[0] = 1  # the share shows nothing past what the coordinator confirms
    assert lease.claim_epoch(250) == 2


def test_a_planted_epoch_znode_is_replaced_by_the_claim(handles: Handles) -> None:
    replaced: list[int] = []
    port = handles()
    assert isinstance(port, ZooKeeperShare)
    port._epochs.on_planted_epoch = replaced.append
    assert claim(port) == 1
    for epoch in range(2, 7):
        port.client.create(f"{port.path}/epochs/{epoch}", b'{"node_id": "stranger"}')

    assert claim(port, "n1") == 2
    assert claim(port, "n1") == 3
    assert replaced == [2, 3]
    record = port.read_epoch(2)
    assert record is not None and record.node_id == "n1"
    # The counter moved with each claim: the planted numbers above it are still unclaimed.
    assert port.epoch_exists(3) and not port.epoch_exists(4)
