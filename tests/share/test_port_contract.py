"""The share port's contract (share/port.py), checked on every implementation alike."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from primacy.share.factory import GroupLocation, GroupUnreadable, reading
from primacy.share.memory import MemoryShareHandle
from primacy.share.port import (
    LockLost,
    ShareObserver,
    SharePort,
    epoch_claims,
    epochs_claimed_before,
    latest_epoch,
)
from primacy.share.posix import PosixShare
from primacy.share.records import (
    EpochRecord,
    HolderInfo,
    NodeEntry,
    PauseMarker,
    Switchover,
)
from primacy.share.zookeeper import ZooKeeperShare
from tests.harness.zookeeper import Ensemble
from tests.share.ports import IN_PROCESS_LOCK_KINDS, Handles, kind_params, zookeeper_handles

TWO_LOCKERS = pytest.mark.parametrize("share_kind", kind_params(IN_PROCESS_LOCK_KINDS))


def _claim(port: SharePort, node: str) -> int:
    return port.claim_epoch(EpochRecord.claim(node, None, 250, False))


@TWO_LOCKERS
def test_the_lock_is_exclusive_until_its_holder_lets_go(handles: Handles) -> None:
    first, second = handles(), handles()
    assert first.try_lock() and first.lock_held
    assert not second.try_lock() and not second.lock_held
    first.check_lock()
    first.drop_lock()
    assert not first.lock_held
    assert second.try_lock()
    with pytest.raises(LockLost):
        first.check_lock()
    second.drop_lock()


@TWO_LOCKERS
def test_a_lock_lost_behind_its_holders_back_is_seen_at_the_next_check(
    share_kind: str, share: Path, handles: Handles
) -> None:
    holder, other = handles(), handles()
    assert holder.try_lock()
    if isinstance(holder, MemoryShareHandle):
        holder.share.steal_lock()
    elif isinstance(holder, ZooKeeperShare):  # an operator's delete; the ensemble takes it
        holder.client.delete(f"{holder.path}/lock")
    else:
        PosixShare(share).layout.lock_file.unlink()  # an operator's rm, a slave recreates it
    assert other.try_lock()
    with pytest.raises(LockLost):
        holder.check_lock()
    holder.drop_lock()
    other.drop_lock()


@TWO_LOCKERS
def test_a_stalled_holders_lock_is_replaced_where_the_share_offers_it(handles: Handles) -> None:
    holder, slave = handles(), handles()
    assert holder.try_lock()
    holder.write_holder(HolderInfo.for_this_process("n1", 1))
    assert not slave.try_lock()
    if isinstance(holder, ZooKeeperShare):  # a stalled session's lock goes when it expires
        assert slave.replace_lock() is False
        assert not slave.try_lock()
        holder.check_lock()
        holder.drop_lock()
        return
    assert slave.replace_lock() is True
    assert slave.read_holder() is None  # a fresh lock file: no record of the old holder
    assert slave.try_lock()
    with pytest.raises(LockLost):
        holder.check_lock()
    slave.check_lock()
    holder.drop_lock()
    slave.check_lock()  # the old holder letting go of the old file frees nothing of ours
    slave.drop_lock()


def test_claims_get_distinct_contiguous_epochs_with_their_records(handles: Handles) -> None:
    ports = [handles() for _ in range(4)]
    epochs = [_claim(port, f"n{i}") for i, port in enumerate(ports)]
    assert epochs == [1, 2, 3, 4]
    reader = handles()
    assert latest_epoch(reader) == 4
    assert [reader.read_epoch(e).node_id for e in epochs] == ["n0", "n1", "n2", "n3"]  # type: ignore[union-attr]
    assert reader.epoch_exists(4) and not reader.epoch_exists(5)
    assert list(epochs_claimed_before(reader, 4)) == [3, 2, 1]


def test_a_rewrite_replaces_a_record_and_never_creates_one(handles: Handles) -> None:
    port = handles()
    epoch = _claim(port, "a")
    record = port.read_epoch(epoch)
    assert record is not None and not record.outlasted and not record.released
    port.rewrite_epoch(EpochRecord(epoch, node_id="a", outlasted=True, released=True))
    again = handles().read_epoch(epoch)
    assert again is not None and again.outlasted and again.released
    with pytest.raises(FileNotFoundError):
        port.rewrite_epoch(EpochRecord(epoch + 1, node_id="a"))
    assert not port.epoch_exists(epoch + 1)


@TWO_LOCKERS
def test_the_holder_record_travels_with_the_lock(handles: Handles) -> None:
    holder, reader = handles(), handles()
    assert holder.try_lock()
    holder.write_holder(HolderInfo.for_this_process("a", 7))
    seen = reader.read_holder()
    assert seen is not None and seen.node_id == "a" and seen.epoch == 7 and not seen.released
    holder.release_lock("a")
    seen = reader.read_holder()
    assert seen is not None and seen.released and seen.epoch == 7
    assert reader.try_lock()
    reader.drop_lock()


def test_the_registry_and_the_markers(handles: Handles) -> None:
    a, b = handles(), handles()
    now = time.time()
    a.publish_node(NodeEntry("a", "h", 1, "127.0.0.1:1", "normal", "master", 1, now))
    b.publish_node(NodeEntry("b", "h", 2, "127.0.0.1:2", "low", "slave", None, now))
    assert [e.node_id for e in a.node_entries()] == ["a", "b"]
    assert not b.is_paused()
    a.pause(PauseMarker("a", now))
    assert b.is_paused()
    b.resume()
    assert not a.is_paused()
    assert b.read_switchover() is None
    a.request_switchover(Switchover("a", "b", 1, now + 5))
    assert b.read_switchover() == Switchover("a", "b", 1, now + 5)
    b.clear_switchover()
    assert a.read_switchover() is None


def test_a_switchover_that_holds_others_back_too_long_holds_nobody(handles: Handles) -> None:
    port = handles()
    port.request_switchover(Switchover("a", "b", 1, time.time() + 3600))
    assert port.read_switchover() is None


@TWO_LOCKERS
def test_hints_wake_a_watcher_when_the_master_lets_go(handles: Handles) -> None:
    master, slave = handles(), handles()
    woken, paused = threading.Event(), threading.Event()
    watch = slave.watch("slave", woken.set, paused.set)
    watch.start()
    try:
        assert master.try_lock()
        master.release_lock("master")
        assert woken.wait(10)
        master.pause(PauseMarker("master", time.time()))
        assert paused.wait(10)
    finally:
        watch.stop()


# ---- what the port says it can do, and what a reader sees ------------------------------


@contextmanager
def reader_of(handle: SharePort) -> Iterator[ShareObserver]:
    """A reader's port on the group ``handle`` is on, built as commands and the replay build
    theirs (share/factory.py); the in-memory share has no reader but its own handles."""
    if isinstance(handle, MemoryShareHandle):
        yield handle.share.handle()
        return
    if isinstance(handle, ZooKeeperShare):
        location = GroupLocation(Path("."), handle.hosts, handle.path, handle.access)
    else:
        assert isinstance(handle, PosixShare)
        location = GroupLocation(handle.layout.root)
    with reading(location) as reader:
        yield reader


def test_the_port_says_what_its_backend_can_do(share_kind: str, handles: Handles) -> None:
    port = handles()
    said = port.capabilities
    assert said.coordination == {"memory": "memory", "zookeeper": "zookeeper"}.get(
        share_kind, "share"
    )
    # A session where the backend has one, and only there: nobody probes for it.
    assert said.has_session == (port.session_state is not None)
    if said.has_session:
        assert port.session_state == "connected"
    assert said.replaces_lock == (share_kind != "zookeeper")


def test_a_reader_sees_every_claim_in_order_with_its_record(handles: Handles) -> None:
    port = handles()
    for node in ("n1", "n2", "n3"):
        _claim(port, node)
    with reader_of(port) as reader:
        assert reader.group_exists()
        claims = epoch_claims(reader)
        assert list(claims) == [1, 2, 3]
        assert [record.node_id for record in claims.values() if record] == ["n1", "n2", "n3"]
        assert all(
            record is not None and record.claimed_unix_s is not None for record in claims.values()
        )


@TWO_LOCKERS
def test_a_reader_sees_the_holder_without_disturbing_the_lock(handles: Handles) -> None:
    holder, other = handles(), handles()
    assert holder.try_lock()
    holder.write_holder(HolderInfo.for_this_process("a", 3))
    with reader_of(holder) as reader:
        seen = reader.read_holder()
        assert seen is not None and (seen.node_id, seen.epoch, seen.released) == ("a", 3, False)
        assert reader.node_entries() == [] and not reader.is_paused()
        assert reader.read_switchover() is None
    holder.check_lock()  # still held: reading it took nothing and dropped nothing
    assert not other.try_lock()
    holder.release_lock("a")


def test_a_reader_refuses_a_share_that_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(GroupUnreadable, match="does not exist"):
        reading(GroupLocation(tmp_path / "missing")).__enter__()


@pytest.mark.zookeeper
def test_a_reader_refuses_a_path_no_group_used_and_creates_nothing(
    zookeeper_ensemble: Ensemble,
) -> None:
    path = f"/test-{uuid.uuid4().hex}"
    location = GroupLocation(Path("."), zookeeper_ensemble.hosts, path, zookeeper_ensemble.access)
    with pytest.raises(GroupUnreadable, match="no primacy group has used"), reading(location):
        pass
    opened: list[ZooKeeperShare] = []
    try:
        other = zookeeper_handles(
            zookeeper_ensemble.hosts, f"{path}-other", opened, zookeeper_ensemble.access
        )()
        assert other.client.exists(path) is None  # type: ignore[attr-defined]
    finally:
        for port in opened:
            port.close()


def test_a_forgotten_node_leaves_the_registry(handles: Handles) -> None:
    """``primacy forget``: a node stopped for good leaves the registry; forgetting it twice
    does nothing; a name no entry can have (a path) is refused, not followed."""
    a, b = handles(), handles()
    now = time.time()
    for node in ("a", "b"):
        a.publish_node(NodeEntry(node, "h", 1, "127.0.0.1:1", "normal", "slave", None, now))
    b.forget_node("a")
    assert [e.node_id for e in a.node_entries()] == ["b"]
    b.forget_node("a")
    for name in ("", ".", "..", "x/y", "../nodes/b"):
        with pytest.raises(ValueError):
            a.forget_node(name)
    assert [e.node_id for e in b.node_entries()] == ["b"]
