"""A master stopped during its takeover wait passes its wait on to the next one.

The takeover wait outlasts the previous master's claim. If that previous
master never served (it was killed while waiting itself), the claim still to
outlast is the one *it* was waiting for, which is longer than its own
keepalive when nodes are configured differently (or a keepalive was edited at
run time). Each epoch's record says whether its master outlasted its
predecessors (``outlasted``); a new master waits for every claim back to the
newest epoch that did (docs/safety.md, "Different keepalive periods").

On emulated NFS hosts, as on NFS: the master on host a gets no file-system
event when another host replaces the lock file, so it learns of it only at
its next keepalive, and claims the role until then.
"""

from __future__ import annotations

import signal
import time

import httpx
import pytest

from primacy.share.posix import PosixShare
from tests.harness.emulated_group import replace_lock_file
from tests.harness.emulated_hosts import EmulatedHosts
from tests.harness.group import MasterPoller, wait_until

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

LONG_KEEPALIVE_MS = 2000
SHORT = ("--lock-keep-alive-period-ms", "100", "--lock-acquire-sleep-interval-ms", "50")


def last_keepalive(port: int) -> object:
    return httpx.get(f"http://127.0.0.1:{port}/status", timeout=2).json()["last_keepalive_unix_s"]


def test_a_master_killed_in_its_takeover_wait_passes_the_wait_on(
    emulated_hosts: EmulatedHosts,
) -> None:
    host_a, host_b, host_c = emulated_hosts(3, lease_s=60.0)
    # a: a long keepalive; b: a short one, but a takeover wait long enough to kill it
    # in; c: short both. b and c are what a group with mixed settings looks like.
    a = emulated_hosts.start_node(host_a, "a", "--lock-keep-alive-period-ms", "2000")
    wait_until(a.is_master, 30, "a to serve")
    b = emulated_hosts.start_node(host_b, "b", *SHORT, "--takeover-delay-ms", "20000")
    wait_until(lambda: b.status("/slave") == 200, 30, "b to be a slave")
    with MasterPoller([a, b]) as poller:
        seen = last_keepalive(a.port)
        wait_until(lambda: last_keepalive(a.port) != seen, 10, "a fresh keepalive of a")
        # Right after a's check passed, an operator replaces the lock file from host b:
        # a goes on claiming the role until its next check, up to 2 s from now.
        replace_lock_file(host_b)
        replaced_at = time.monotonic()
        wait_until(lambda: "claimed epoch 2" in b.log(), 5, "b to claim epoch 2")
        # c waits as a slave before b dies, with a priority a defers to once its registry
        # shows c, so it is c that takes the freed lock. Started after b's death, c raced
        # a, which retries as soon as its next check sees epoch 2 (on a loaded machine a
        # won, and the test waited in vain for c).
        c = emulated_hosts.start_node(host_c, "c", *SHORT, "--priority", "highest")
        poller.add(c)
        wait_until(lambda: c.status("/slave") == 200, 30, "c to wait as a slave")

        def a_defers_to_c() -> bool:
            members = httpx.get(f"http://127.0.0.1:{a.port}/cluster", timeout=2).json()
            return any(
                m["node_id"] == "c" and m["live"] and m["priority"] == "highest"
                for m in members["members"]
            )

        wait_until(a_defers_to_c, 10, "a's registry to show c")
        b.signal(signal.SIGKILL)  # in its 20 s wait: epoch 2 never outlasted epoch 1
        wait_until(c.is_master, 30, "c to serve")
        served_after_s = time.monotonic() - replaced_at
        time.sleep(0.3)
    a_claims = [x.decided_at for x in poller.answers if x.node_id == "a" and x.status == 200]
    assert max(t for t in a_claims if t is not None) > replaced_at  # a did claim on, unaware
    assert poller.two_masters() == []
    served_epoch = httpx.get(f"http://127.0.0.1:{c.port}/status", timeout=2).json()["journal"]
    records = PosixShare(emulated_hosts.backing)  # the server's files: no host's cache between
    second = records.read_epoch(2)
    assert second is not None and second.outlasted is False  # b never got there
    # c's first claim is epoch 3; on a loaded machine it may lose that claim during its own
    # wait (a 100 ms keepalive) and serve under the next one, and b may have lost epoch 2
    # in its own wait and claimed again before it was killed (CI at load 12: epoch 3 was
    # b's): none of those ever outlasted.
    for epoch in range(3, served_epoch["epoch"]):
        lost = records.read_epoch(epoch)
        assert lost is not None and lost.node_id in ("b", "c") and lost.outlasted is False
    serving = records.read_epoch(served_epoch["epoch"])
    assert serving is not None and serving.outlasted is True and serving.node_id == "c"
    # c waited for a's claim (1.1 x 2 s after c's own claim), not for b's 100 ms one.
    assert served_after_s >= 1.1 * LONG_KEEPALIVE_MS / 1000, served_after_s
