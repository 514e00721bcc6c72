"""Issue 29 on the real NFSv4 server: a master frozen past the lease, the server restarted.

The other real-server scenarios and their helpers are in test_real_nfs.py; these
are a file of their own so the two test workers share the tier's time.
"""

from __future__ import annotations

import signal

import pytest

from tests.fault.test_real_nfs import acknowledged_more
from tests.harness.chaos_real_nfs import NFS4_PROFILE
from tests.harness.checker import assert_ok, check
from tests.harness.emulated_group import DEMOTED, EmulatedGroup, epoch_of
from tests.harness.ganesha.host import RealNfsHosts
from tests.harness.group import MasterPoller, wait_until
from tests.harness.traffic import Traffic

pytestmark = [pytest.mark.nfs, pytest.mark.fuse, pytest.mark.slow]


@pytest.mark.parametrize("frozen", ["supervisor", "client"])
def test_master_frozen_past_the_lease_then_resumed(real_nfs: RealNfsHosts, frozen: str) -> None:
    group = EmulatedGroup(real_nfs, 2, extra=NFS4_PROFILE)
    old = group.nodes["n1"]
    host = group.host_of(old)
    first_epoch = epoch_of(old)
    with MasterPoller(group.nodes.values()) as poller, Traffic(group.url, 2) as traffic:
        acknowledged_more(traffic, "before the freeze")
        if frozen == "supervisor":
            # The host's client keeps renewing (as a kernel does): the server never
            # expires the lock. The frozen master's registry entry stops changing; after
            # the profile's stall_takeover_ms the slave replaces the lock file, claims
            # the next epoch, outlasts the frozen master's claim and serves. Resumed, the
            # old master's lease check finds the lock file replaced: it demotes.
            old.signal(signal.SIGSTOP)
            try:
                new = group.wait_for_master(timeout_s=60, exclude={old.node_id})
                acknowledged_more(traffic, "from the new master")
            finally:
                old.signal(signal.SIGCONT)
            group.wait_for_slave(old, timeout_s=60)
            assert "PRIMACY-1025 node n2 replaced the lock file: its holder n1" in new.log()
            assert epoch_of(new) != first_epoch
        else:
            # The host's client stops: nothing renews, the server expires the lease
            # and a slave takes over; the resumed master finds its lock gone.
            host.freeze()
            try:
                new = group.wait_for_master(timeout_s=60, exclude={old.node_id})
                acknowledged_more(traffic, "from the new master")
            finally:
                host.thaw()
            group.wait_for_slave(old, timeout_s=60)
            assert DEMOTED in old.log()
            assert epoch_of(new) != first_epoch
        acknowledged_more(traffic, "after the resume")
    assert_ok(check(traffic, group.backing, poller))


def test_server_restarted_without_then_with_grace_the_holder_cannot_reclaim_and_demotes(
    real_nfs: RealNfsHosts,
) -> None:
    # The server forgets every lock. libnfs does not reclaim, so the holder cannot
    # get its lock back: its next lease check fails and it demotes. Without a grace
    # period any node may lock at once; with one, no new lock until it ends.
    group = EmulatedGroup(real_nfs, 2, extra=NFS4_PROFILE)
    with MasterPoller(group.nodes.values()) as poller, Traffic(group.url, 2) as traffic:
        acknowledged_more(traffic, "before the restarts")
        for grace_s in (0, 6):
            holder = group.wait_for_master(timeout_s=60)
            epoch = epoch_of(holder)
            demotions = holder.log().count(DEMOTED)
            real_nfs.server.restart(grace_s=grace_s)
            wait_until(
                lambda holder=holder, demotions=demotions: holder.log().count(DEMOTED) > demotions,
                60,
                "the holder to demote",
            )
            master = group.wait_for_master(timeout_s=90)
            assert epoch_of(master) != epoch
            acknowledged_more(traffic, f"after the restart with grace {grace_s} s")
    assert_ok(check(traffic, group.backing, poller))
