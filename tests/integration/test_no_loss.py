"""Producers and consumers through failovers of real supervisors: nothing acknowledged is lost.

After each run ``tests/harness/checker.py`` judges what the clients saw against
the journal: every message whose RECEIPT arrived was consumed, the journal
stores no message id twice, and nothing acknowledged lies past a fence.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from primacy.share.layout import LOCK_FILE_NAME
from tests.harness.checker import assert_ok, check
from tests.harness.group import Group, MasterPoller, wait_until
from tests.harness.traffic import StompGroup, Traffic

pytestmark = pytest.mark.slow


def test_repeated_sigkill_of_the_master_loses_no_acknowledged_message(
    group: Group, share: Path
) -> None:
    stomp = StompGroup(group.start, 3)
    group.wait_for_master(timeout_s=30)
    with Traffic(stomp.url, producers=2) as traffic:
        for _ in range(4):
            assert traffic.wait_for_acknowledged(20, 30), "this master acknowledged nothing"
            wait_until(
                lambda: sum(n.status("/health") == 200 for n in group.alive()) >= 2,
                30,
                "two running nodes",
            )
            master = group.wait_for_master(timeout_s=30)
            master.signal(signal.SIGKILL)
            master.process.wait(10)
            stomp.start(master.node_id)
        assert traffic.wait_for_acknowledged(20, 30), "the last master acknowledged nothing"
    assert_ok(check(traffic, share))
    assert len(traffic.acknowledged) >= 100


def test_a_frozen_master_whose_lock_was_replaced_loses_nothing_when_it_resumes(
    group: Group, share: Path
) -> None:
    stomp = StompGroup(group.start, 2)
    old = group.wait_for_master(timeout_s=30)
    with Traffic(stomp.url, producers=2) as traffic:
        assert traffic.wait_for_acknowledged(20, 30), "the first master acknowledged nothing"
        old.signal(signal.SIGSTOP)
        (share / "replacement").write_text("")
        os.replace(share / "replacement", share / LOCK_FILE_NAME)
        group.wait_for_master(timeout_s=30, exclude={old.node_id})
        # The new master serves while the old one is frozen.
        assert traffic.wait_for_acknowledged(20, 30), "the new master acknowledged nothing"
        old.signal(signal.SIGCONT)
        wait_until(lambda: "PRIMACY-1003" in old.log(), 15, "the old master to demote")
        assert traffic.wait_for_acknowledged(20, 30), "nothing acknowledged after the resume"
    assert_ok(check(traffic, share))
    assert len(traffic.acknowledged) >= 60


def test_a_frozen_master_is_replaced_by_the_slave_that_sees_it_stall(
    group: Group, share: Path
) -> None:
    # The frozen process keeps its lock (flock), as a crashed NFSv4 client's lock outlives
    # it on the server: the slave sees the master's registry entry stop changing and
    # replaces the lock file itself (stall_takeover_ms), then takes over as usual.
    stall = ("--stall-takeover-ms", "1500", "--registry-refresh-ms", "300")
    stomp = StompGroup(group.start, 2, *stall)
    old = group.wait_for_master(timeout_s=30)
    with MasterPoller(stomp.nodes.values()) as poller, Traffic(stomp.url, producers=2) as traffic:
        assert traffic.wait_for_acknowledged(20, 30)
        old.signal(signal.SIGSTOP)
        try:
            new = group.wait_for_master(timeout_s=30, exclude={old.node_id})
            assert traffic.wait_for_acknowledged(20, 30), "the new master acknowledged nothing"
        finally:
            old.signal(signal.SIGCONT)
        wait_until(lambda: "PRIMACY-1003" in old.log(), 15, "the old master to demote")
        assert traffic.wait_for_acknowledged(20, 30)
    assert f"PRIMACY-1025 node {new.node_id} replaced the lock file: its holder {old.node_id}" in (
        new.log()
    )
    assert_ok(check(traffic, share, poller))
