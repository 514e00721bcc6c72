"""Whole nodes in this process over an in-memory share: roles, takeover and /master, in seconds.

Real ``Node`` objects (role loop, lock I/O worker, registry thread, real HTTP
server); only the share is in memory (tests/harness/memory_group.py). The same
scenarios with real processes, signals and filesystems are in tests/integration.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness.cli import primacy
from tests.harness.group import MasterPoller, wait_until
from tests.harness.memory_group import InProcessNode, MemoryGroup


def test_one_node_serves_and_the_others_answer_503(memory_group: MemoryGroup) -> None:
    a, b = memory_group.start("a"), memory_group.start("b")
    master = memory_group.wait_for_master()
    slave = b if master is a else a
    assert slave.status("/master") == 503 and slave.status("/slave") == 200
    status = httpx.get(f"http://127.0.0.1:{master.port}/status", timeout=5).json()
    assert status["role"] == "master" and status["epoch"] == 1
    assert memory_group.share.holder is not None
    assert memory_group.share.holder.node_id == master.node_id


def test_a_lock_lost_behind_the_masters_back_moves_the_role_to_a_later_epoch(
    memory_group: MemoryGroup,
) -> None:
    """An expired NFS lease, in memory: the master is not told. The other node takes the lock,
    claims epoch 2, waits out the old claim, and serves; the old master demotes at its next
    lease check, and no two nodes ever answer 200 for overlapping decisions."""
    a, b = memory_group.start("a"), memory_group.start("b")
    first = memory_group.wait_for_master()
    with MasterPoller([a, b]) as poller:  # type: ignore[list-item]
        wait_until(lambda: poller.epochs_seen_serving() == {1}, 15, "the poller to see epoch 1")
        memory_group.share.steal_lock()
        wait_until(lambda: 2 in poller.epochs_seen_serving(), 15, "epoch 2 serving")
        wait_until(lambda: [n.epoch() for n in (a, b) if n.is_master()] == [2], 15, "one master")
    assert first.role() == "slave" or first.epoch() == 2
    assert poller.two_masters() == []


def test_a_share_that_fails_demotes_the_master_and_the_group_recovers(
    memory_group: MemoryGroup,
) -> None:
    memory_group.start("a"), memory_group.start("b")
    memory_group.wait_for_master()
    with memory_group.share.failing():
        wait_until(lambda: memory_group.masters() == [], 15, "the master to stop claiming")
    master = memory_group.wait_for_master()
    assert master.epoch() == 2  # whoever serves again claimed a later epoch


def test_a_graceful_stop_hands_over_without_a_takeover_wait(
    memory_group: MemoryGroup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="primacy")
    a, b = memory_group.start("a"), memory_group.start("b")
    first = memory_group.wait_for_master()
    other = b if first is a else a
    first.stop()
    wait_until(lambda: other.is_master(), 15, "the other node to serve")
    assert other.epoch() == 2
    messages = [record.getMessage() for record in caplog.records]
    assert any("handed over: no takeover wait" in m for m in messages), messages


def test_a_node_of_priority_never_does_not_take_over(memory_group: MemoryGroup) -> None:
    a = memory_group.start("a")
    never = memory_group.start("never", priority="never")
    wait_until(lambda: a.is_master(), 15, "a to serve")
    a.stop()
    wait_until(
        lambda: memory_group.share.holder is not None and memory_group.share.holder.released,
        15,
        "the release",
    )
    assert never.role() == "slave" and never.status("/master") == 503
    assert memory_group.share.epochs.keys() == {1}


def test_an_admin_pause_holds_the_group_and_every_node_reports_it(
    memory_group: MemoryGroup,
) -> None:
    a = memory_group.start("a", admin_token="secret-token")
    b = memory_group.start("b")
    memory_group.wait_for_master()
    answer = httpx.post(
        f"http://127.0.0.1:{a.port}/pause",
        headers={"Authorization": "Bearer secret-token"},
        timeout=5,
    )
    assert answer.status_code == 200, answer.text
    assert memory_group.share.paused is not None
    # The node that was asked says so at once: "paused" is one fact, the role machine's, not
    # a second copy that changed only at the next registry read.
    assert httpx.get(f"http://127.0.0.1:{a.port}/status", timeout=5).json()["paused"] is True
    for node in (a, b):
        wait_until(
            lambda n=node: httpx.get(f"http://127.0.0.1:{n.port}/status", timeout=5).json()[
                "paused"
            ],
            15,
            f"{node.node_id} to report the pause",
        )


def _master_and_registered_slave(
    memory_group: MemoryGroup, **master_keys: Any
) -> tuple[InProcessNode, InProcessNode]:
    """Master ``a`` (admin token ``secret-token``), then slave ``b`` once the share lists it."""
    a = memory_group.start("a", admin_token="secret-token", **master_keys)
    assert memory_group.wait_for_master() is a
    b = memory_group.start("b")
    wait_until(
        lambda: (
            b.role() == "slave"
            and getattr(memory_group.share.nodes.get("b"), "role", None) == "slave"
        ),
        15,
        "b to register as a slave",
    )
    return a, b


def _switchover(master: InProcessNode) -> httpx.Response:
    answer = httpx.post(
        f"http://127.0.0.1:{master.port}/switchover",
        headers={"Authorization": "Bearer secret-token"},
        timeout=5,
    )
    assert answer.status_code == 200, answer.text
    return answer


def test_a_switchover_sees_a_slave_that_registered_after_the_masters_last_registry_read(
    memory_group: MemoryGroup,
) -> None:
    # The master's /cluster is as old as its last registry refresh (a minute here): a slave
    # that registered since is still a candidate, because the switchover reads the share.
    a, b = _master_and_registered_slave(memory_group, registry_refresh_ms=60_000)
    assert [m.node_id for m in a.node.snapshot().cluster] == ["a"]
    answer = _switchover(a)
    assert answer.json()["to"] == "b"
    assert answer.json()["to_http"] == f"127.0.0.1:{b.port}"
    wait_until(b.is_master, 15, "b to take over")


def test_the_switchover_command_watches_a_target_the_masters_cluster_view_lacks(
    memory_group: MemoryGroup, tmp_path: Path
) -> None:
    a, b = _master_and_registered_slave(memory_group, registry_refresh_ms=60_000)
    token = tmp_path / "admin.token"
    token.write_text("secret-token")
    token.chmod(0o600)
    done = primacy("switchover", "--url", f"http://127.0.0.1:{a.port}", "--token-file", str(token))
    assert done.returncode == 0, done.stderr
    assert "b is serving as master after" in done.stdout
    assert b.is_master()


def test_a_switchover_passes_over_a_registry_entry_with_a_priority_nobody_knows(
    memory_group: MemoryGroup,
) -> None:
    a, _ = _master_and_registered_slave(memory_group)
    # Someone who can write the share plants an entry; the registry is untrusted input.
    planted = dataclasses.replace(memory_group.share.nodes["b"], node_id="z", priority="ultra")
    memory_group.share.nodes["z"] = planted
    answer = _switchover(a)
    assert answer.json()["to"] == "b"


def test_an_admin_request_on_a_failing_share_is_refused_with_503(
    memory_group: MemoryGroup,
) -> None:
    a, _ = _master_and_registered_slave(memory_group)
    with memory_group.share.failing():
        answer = httpx.post(
            f"http://127.0.0.1:{a.port}/pause",
            headers={"Authorization": "Bearer secret-token"},
            timeout=5,
        )
    assert answer.status_code == 503, answer.text
    assert "the share did not answer" in answer.json()["error"]
    assert memory_group.share.paused is None
