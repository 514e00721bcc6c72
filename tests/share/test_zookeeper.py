"""What the ZooKeeper port adds to the contract (tests/share/test_port_contract.py runs that on
it too): the lock is the session's, and the epoch counter admits only claims."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, Permissions

from primacy.cli.localgroup import wait_until
from primacy.locker.lease import Lease, LeaseLost
from primacy.share.port import LockLost
from primacy.share.records import EpochRecord, PauseMarker
from primacy.share.zookeeper import ZooKeeperShare
from primacy.share.zookeeper_access import open_to_anyone
from tests.harness.zookeeper import Ensemble
from tests.harness.zookeeper_group import stranger_client
from tests.share.ports import Handles

pytestmark = [pytest.mark.zookeeper, pytest.mark.parametrize("share_kind", ["zookeeper"])]


def expire_session(port: ZooKeeperShare) -> None:
    """Have the ensemble expire ``port``'s session: another client attaches to it and closes
    it, as the ensemble does to a session it has not heard from for its timeout."""
    session_id, password = port.client.client_id
    thief = KazooClient(
        hosts=port.hosts, client_id=(session_id, password), **port.access.kazoo_options()
    )
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


# ---- access: ACLs, credentials, TLS (issue 42, finding 2) ------------------------------------


def test_a_client_without_credentials_may_read_but_change_nothing(
    handles: Handles, zookeeper_ensemble: Ensemble
) -> None:
    port = handles()
    assert isinstance(port, ZooKeeperShare)
    lease = Lease(port, "master")
    assert lease.try_acquire()
    epoch = lease.claim_epoch(250)
    port.pause(PauseMarker("operator", time.time()))
    port.resume()
    path = port.path
    stranger = stranger_client(zookeeper_ensemble)
    try:
        for znode in (path, f"{path}/epoch", f"{path}/lock", f"{path}/epochs/{epoch}"):
            # The group's identity may do all, anyone else read (ZooKeeper shows a stranger
            # the digest identity without its hash).
            acl, _ = stranger.get_acls(znode)
            assert not open_to_anyone(acl), (znode, acl)
            assert {(e.id.scheme, e.id.id.split(":")[0], e.perms) for e in acl} == {
                ("digest", "primacy", Permissions.ALL),
                ("world", "anyone", Permissions.READ),
            }, acl
            assert port.access.admits(port.client.get_acls(znode)[0])
        attempts = [
            lambda: stranger.delete(f"{path}/lock"),
            lambda: stranger.set(f"{path}/epoch", b"0"),
            lambda: stranger.delete(f"{path}/epochs/{epoch}"),
            lambda: stranger.create(f"{path}/paused", b"{}"),
            lambda: stranger.set_acls(f"{path}/epoch", OPEN_ACL_UNSAFE),
            *[
                lambda n=n: stranger.create(f"{path}/epochs/{n}", b"{}")
                for n in range(epoch + 1, epoch + 6)
            ],
        ]
        for attempt in attempts:
            with pytest.raises(NoAuthError):
                attempt()
        assert stranger.get(f"{path}/epoch")[0] == str(epoch).encode()  # world read
    finally:
        stranger.stop()
        stranger.close()
    lease.revalidate()
    assert not port.is_paused()


def test_a_node_with_credentials_closes_a_group_left_open(
    handles: Handles, zookeeper_ensemble: Ensemble
) -> None:
    # A group made by nodes without credentials (zookeeper_allow_open_acl, or before ACLs).
    first = handles()
    assert isinstance(first, ZooKeeperShare)
    anonymous = ZooKeeperShare(
        first.hosts,
        first.path,
        session_timeout_s=4.0,
        access=replace(first.access, user=None, password=None),
    )
    try:
        wait_until(lambda: anonymous.session_state == "connected", 30, "a session")
        assert anonymous.claim_epoch(EpochRecord.claim("old", None, 250, False)) == 1
        assert open_to_anyone(anonymous.client.get_acls(f"{first.path}/epoch")[0])
    finally:
        anonymous.close()
    assert first.claim_epoch(EpochRecord.claim("new", None, 250, False)) == 2
    assert f"{first.path}/epoch" in first.tightened
    assert f"{first.path}/epochs/1" in first.tightened
    for znode in first.tightened:
        assert first.access.admits(first.client.get_acls(znode)[0]), znode
    assert first.secure_group() == []  # nothing open any more


def test_credentials_of_another_identity_are_refused(
    handles: Handles, zookeeper_ensemble: Ensemble
) -> None:
    owner = handles()
    assert isinstance(owner, ZooKeeperShare)
    assert owner.claim_epoch(EpochRecord.claim("a", None, 250, False)) == 1
    impostor = ZooKeeperShare(
        owner.hosts,
        owner.path,
        session_timeout_s=4.0,
        access=replace(owner.access, password="not-the-password"),
    )
    try:
        wait_until(lambda: impostor.session_state == "connected", 30, "a session")
        with pytest.raises(PermissionError, match="belongs to another ZooKeeper identity"):
            impostor.secure_group()
        with pytest.raises(PermissionError, match="another ZooKeeper identity"):
            impostor.claim_epoch(EpochRecord.claim("b", None, 250, False))
    finally:
        impostor.close()


def test_tls_is_required_on_the_secure_port(handles: Handles, zookeeper_ensemble: Ensemble) -> None:
    # Plaintext gets no session on the TLS port; a server certificate that does not chain to
    # the CA given is refused.
    plain = ZooKeeperShare(zookeeper_ensemble.hosts, "/tls-test", session_timeout_s=2.0)
    stranger_ca = replace(
        zookeeper_ensemble.access, tls_ca_file=zookeeper_ensemble.pki.stranger_cert
    )
    wrong_ca = ZooKeeperShare(
        zookeeper_ensemble.hosts, "/tls-test", session_timeout_s=2.0, access=stranger_ca
    )
    try:
        time.sleep(2.0)
        assert plain.session_state != "connected"
        assert wrong_ca.session_state != "connected"
    finally:
        plain.close()
        wrong_ca.close()
