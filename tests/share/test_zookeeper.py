"""What the ZooKeeper port adds to the contract (tests/share/test_port_contract.py runs that on
it too): the lock is the session's, and the epoch counter admits only claims."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from primacy.cli.localgroup import wait_until
from primacy.locker.lease import Lease, LeaseLost
from primacy.share.port import LockLost
from primacy.share.records import EpochRecord
from primacy.share.zookeeper import ZooKeeperShare
from tests.share.ports import Handles

pytestmark = [pytest.mark.zookeeper, pytest.mark.parametrize("share_kind", ["zookeeper"])]


def expire_session(port: ZooKeeperShare) -> None:
    """Have the ensemble expire ``port``'s session: another client attaches to it and closes
    it, as the ensemble does to a session it has not heard from for its timeout."""
    session_id, password = port.client.client_id
    thief = KazooClient(hosts=port.hosts, client_id=(session_id, password))
    thief.start(timeout=30)
    thief.stop()
    thief.close()


def test_a_lease_ends_with_the_session_that_held_it(handles: Handles) -> None:
    holder, other = handles(), handles()
    assert isinstance(holder, ZooKeeperShare)
    lease = Lease(holder, "old")
    assert lease.try_acquire()
    epoch = lease.claim_epoch(250)
    lease.revalidate()
    assert not other.try_lock()

    expire_session(holder)
    # The ensemble deleted the session's lock: another node takes it and the next epoch.
    wait_until(other.try_lock, 30, "the expired session's lock to be free")
    assert other.claim_epoch(EpochRecord.claim("new", None, 250, False)) == epoch + 1
    with pytest.raises(LeaseLost):
        lease.revalidate()
    # kazoo opens a new session; it is not the one that held the lock, nor may it take it.
    wait_until(lambda: holder.session_state == "connected", 30, "a new session")
    with pytest.raises(LockLost):
        holder.check_lock()
    lease.abandon()
    assert not holder.try_lock()


def test_a_check_without_a_connection_fails_at_once(handles: Handles) -> None:
    port = handles()
    assert isinstance(port, ZooKeeperShare)
    assert port.try_lock()
    port.client.stop()  # no connection, so no answer from the ensemble: no proof
    with pytest.raises(LockLost, match="not connected"):
        port.check_lock()


def test_a_counter_changed_by_anything_but_a_claim_stops_claims(handles: Handles) -> None:
    port = handles()
    assert isinstance(port, ZooKeeperShare)
    assert port.claim_epoch(EpochRecord.claim("a", None, 250, False)) == 1
    port.client.set(f"{port.path}/epoch", b"7")  # an operator's edit: version and data part
    with pytest.raises(OSError, match="changed by something other than a claim"):
        port.claim_epoch(EpochRecord.claim("a", None, 250, False))


def test_a_later_epoch_is_never_denied_on_a_read_that_lags(handles: Handles) -> None:
    # A follower may answer a plain read from a copy behind the leader. Such a read cannot be
    # made on demand in a healthy ensemble, so the port's own reads of the counter are made
    # to lag here (they answer the counter as it was before the rival's claim): the lease
    # check must still learn of the later epoch, or fail, never pass.
    mine, rival = handles(), handles()
    assert isinstance(mine, ZooKeeperShare)
    epoch = mine.claim_epoch(EpochRecord.claim("old", None, 250, False))
    stale = mine.client.get(f"{mine.path}/epoch")
    assert rival.claim_epoch(EpochRecord.claim("new", None, 250, False)) == epoch + 1
    lagging_reads = [stale, stale, stale]
    real_get = mine.client.get_async

    def get_async(path: str, *args: object) -> object:
        if path.endswith("/epoch") and lagging_reads:
            answer = mine.client.handler.async_result()
            answer.set(lagging_reads.pop())
            return answer
        return real_get(path, *args)

    mine.client.get_async = get_async
    assert mine.epoch_exists(epoch + 1)
    assert not lagging_reads  # it did read the lagging copy, and did not trust it
