"""A slave replaces the lock file of a holder whose registry entry stopped changing (issue 29).

The slave's share job over the in-memory share, with a clock the test moves: what
it sees at each refused attempt decides, and only the holder's own entry counts.
The real processes are in tests/integration/test_no_loss.py (a frozen master) and
tests/fault/test_real_nfs.py (a crashed NFSv4 host).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from primacy.share.memory import MemoryShare, MemoryShareHandle
from primacy.share.port import LockLost
from primacy.share.records import HolderInfo, NodeEntry
from primacy.supervisor.config import load_config
from primacy.supervisor.shell.share_jobs import ShareJobs


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _master(share: MemoryShare) -> MemoryShareHandle:
    master = share.handle()
    assert master.try_lock()
    master.write_holder(HolderInfo("n1", "host-a", 7, 1.0, 1))
    _refresh(master, 1.0)
    return master


def _refresh(master: MemoryShareHandle, updated_unix_s: float) -> None:
    master.publish_node(
        NodeEntry("n1", "host-a", 7, "127.0.0.1:1", "normal", "master", 1, updated_unix_s)
    )


def _slave(share: MemoryShare, clock: Clock, tmp_path: Path, stall_ms: int) -> ShareJobs:
    config = load_config(None, {"node_id": "n2", "share": tmp_path, "stall_takeover_ms": stall_ms})
    return ShareJobs(config, share.handle(), clock)


def test_a_holder_whose_entry_stopped_changing_loses_its_lock_to_the_slave(
    tmp_path: Path,
) -> None:
    share, clock = MemoryShare(), Clock()
    master = _master(share)
    slave = _slave(share, clock, tmp_path, 3000)
    assert not slave.try_lock().acquired
    clock.now += 2.9
    assert not slave.try_lock().acquired
    clock.now += 0.1
    assert slave.try_lock().acquired
    assert slave.lease.held
    with pytest.raises(LockLost):
        master.check_lock()


def test_a_holder_that_refreshes_its_entry_keeps_its_lock(tmp_path: Path) -> None:
    share, clock = MemoryShare(), Clock()
    master = _master(share)
    slave = _slave(share, clock, tmp_path, 3000)
    for second in range(2, 30):
        _refresh(master, float(second))
        clock.now += 1.0
        assert not slave.try_lock().acquired
    master.check_lock()


def test_without_stall_takeover_a_stalled_holder_keeps_its_lock(tmp_path: Path) -> None:
    share, clock = MemoryShare(), Clock()
    master = _master(share)
    slave = _slave(share, clock, tmp_path, 0)
    for _ in range(30):
        clock.now += 1.0
        assert not slave.try_lock().acquired
    master.check_lock()
