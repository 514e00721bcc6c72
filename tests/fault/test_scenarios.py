"""Issue 8's scenarios: real supervisors, each on its own emulated NFS host, under traffic.

Every scenario ends with the checker (``tests/harness/checker.py``): every
acknowledged message consumed, no id stored twice, nothing acknowledged past a
fence, never two nodes answering 200 on ``/master`` at once.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.harness.checker import assert_ok, check
from tests.harness.emulated_group import (
    DEMOTED,
    EmulatedGroup,
    epoch_of,
    freeze_and_replace_lock,
    mount_tmpfs,
    share_filled,
)
from tests.harness.emulated_hosts import EmulatedHosts
from tests.harness.group import MasterPoller, wait_until
from tests.harness.traffic import Traffic

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

_ACKS_PER_PHASE = 20  # acknowledged messages to see before and after each fault
_PHASE_TIMEOUT_S = 30.0


def _acknowledged_more(traffic: Traffic, what: str) -> None:
    assert traffic.wait_for_acknowledged(_ACKS_PER_PHASE, _PHASE_TIMEOUT_S), (
        f"no {_ACKS_PER_PHASE} more receipts {what}; client saw {traffic.failover_reasons[-3:]}"
    )


@pytest.mark.parametrize("mode", ["eio", "hang"])
def test_master_partitioned_past_its_lease_is_fenced_and_demotes(
    emulated_hosts: EmulatedHosts, mode: str
) -> None:
    group = EmulatedGroup(emulated_hosts, 2, lease_s=1.0)
    old = group.nodes["n1"]
    first_epoch = epoch_of(old)
    with MasterPoller(group.nodes.values()) as poller, Traffic(group.url, 2) as traffic:
        _acknowledged_more(traffic, "before the partition")
        group.host_of(old).partition(mode)
        new = group.wait_for_master(exclude={old.node_id})
        _acknowledged_more(traffic, "from the new master")
        group.host_of(old).heal()
        group.wait_for_slave(old)
        _acknowledged_more(traffic, "after the heal")
    assert DEMOTED in old.log()
    new_epoch = epoch_of(new)
    assert first_epoch is not None and new_epoch is not None and new_epoch > first_epoch
    verdict = check(traffic, group.backing, poller)
    assert_ok(verdict)
    assert first_epoch in verdict.epochs and new_epoch in verdict.epochs


def test_partition_shorter_than_the_lease_and_the_keepalive_changes_nothing(
    emulated_hosts: EmulatedHosts,
) -> None:
    # A hang shorter than the keepalive period: the lease check waits and then
    # passes. (An EIO, however short, fails the check, and the master demotes by
    # design: any I/O error on the share means the lease is in doubt.)
    group = EmulatedGroup(
        emulated_hosts, 2, lease_s=3.0, extra=("--lock-keep-alive-period-ms", "1500")
    )
    master = group.nodes["n1"]
    epoch = epoch_of(master)
    with MasterPoller(group.nodes.values()) as poller, Traffic(group.url, 2) as traffic:
        _acknowledged_more(traffic, "before the partition")
        host = group.host_of(master)
        host.partition("hang")
        wait_until(lambda: host.status()["partitioned_for_s"] >= 0.3, 5, "0.3 s of partition")
        host.heal()
        _acknowledged_more(traffic, "after the heal")
    assert group.masters() == [master]
    assert epoch_of(master) == epoch
    assert DEMOTED not in master.log()
    verdict = check(traffic, group.backing, poller)
    assert_ok(verdict)
    assert verdict.epochs == (epoch,)


def test_frozen_master_whose_lock_file_was_replaced_never_acknowledges_after_the_fence(
    emulated_hosts: EmulatedHosts,
) -> None:
    # On emulated mounts the replaced file's fstat shows the new inode
    # (docs/safety.md), so only the epoch check can fence the old master here.
    group = EmulatedGroup(emulated_hosts, 2, lease_s=1.0)
    old = group.nodes["n1"]
    with MasterPoller(group.nodes.values()) as poller, Traffic(group.url, 2) as traffic:
        _acknowledged_more(traffic, "before the freeze")
        freeze_and_replace_lock(group, old, frozen_s=1.0)
        wait_until(lambda: DEMOTED in old.log(), 15, "the old master to demote")
        group.wait_for_slave(old)
        _acknowledged_more(traffic, "after the old master resumed")
    verdict = check(traffic, group.backing, poller)
    assert_ok(verdict)
    assert len(verdict.epochs) >= 2


def test_slow_fsync_on_the_master_slows_receipts_but_loses_nothing(
    emulated_hosts: EmulatedHosts,
) -> None:
    group = EmulatedGroup(emulated_hosts, 2, lease_s=1.0)
    master = group.nodes["n1"]
    with MasterPoller(group.nodes.values()) as poller, Traffic(group.url, 2) as traffic:
        _acknowledged_more(traffic, "before the slow fsync")
        group.host_of(master).slow_fsync(150)
        _acknowledged_more(traffic, "while every fsync takes 150 ms")
        group.host_of(master).clear_faults()
        _acknowledged_more(traffic, "after fsync is fast again")
    assert_ok(check(traffic, group.backing, poller))


def test_eio_on_the_journal_only_moves_the_master_and_loses_nothing(
    emulated_hosts: EmulatedHosts,
) -> None:
    group = EmulatedGroup(emulated_hosts, 2, lease_s=1.0)
    old = group.nodes["n1"]
    with MasterPoller(group.nodes.values()) as poller, Traffic(group.url, 2) as traffic:
        _acknowledged_more(traffic, "before the journal fails")
        group.host_of(old).eio_under("/journal")
        group.wait_for_master(exclude={old.node_id})
        _acknowledged_more(traffic, "from the master with a working journal")
        group.host_of(old).clear_faults()
        _acknowledged_more(traffic, "after the journal works again everywhere")
    assert DEMOTED in old.log()
    assert_ok(check(traffic, group.backing, poller))


def test_a_full_share_refuses_writes_clearly_and_recovers_when_space_returns(
    emulated_hosts: EmulatedHosts,
) -> None:
    mount_tmpfs(emulated_hosts.backing, size="4m")
    try:
        group = EmulatedGroup(emulated_hosts, 2, lease_s=1.0)
        with MasterPoller(group.nodes.values()) as poller, Traffic(group.url, 2) as traffic:
            _acknowledged_more(traffic, "before the share fills")
            with share_filled(group.backing):
                wait_until(
                    lambda: any(
                        "PRIMACY-1514" in r and "No space left on device" in r
                        for r in traffic.failover_reasons
                    ),
                    _PHASE_TIMEOUT_S,
                    "clients to be told the journal failed because the share is full",
                )
                stalled_at = len(traffic.acknowledged)
            _acknowledged_more(traffic, "after space returned")
        verdict = check(traffic, group.backing, poller)
        assert_ok(verdict)
        assert verdict.acknowledged > stalled_at
    finally:
        emulated_hosts.close()  # nothing may hold the tmpfs when it goes
        subprocess.run(["umount", str(emulated_hosts.backing)], check=True)
