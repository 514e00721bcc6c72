"""Failover between real supervisor processes on a temporary share."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from primacy.share.layout import LOCK_FILE_NAME
from primacy.store import tools
from tests.harness.group import Answer, Group, MasterPoller, NodeProcess, wait_until

pytestmark = pytest.mark.slow


def _roles(nodes: list[NodeProcess]) -> dict[str, tuple[int | None, int | None]]:
    return {node.node_id: (node.status("/master"), node.status("/slave")) for node in nodes}


def test_three_nodes_elect_exactly_one_master(group: Group) -> None:
    nodes = group.start_many(3)
    master = group.wait_for_master()
    for _ in range(20):  # and it stays that way
        assert group.masters() == [master]
        time.sleep(0.05)
    for node in nodes:
        expected = (200, 503) if node is master else (503, 200)
        assert _roles([node])[node.node_id] == expected
        assert node.status("/health") == 200
    status = httpx.get(f"http://127.0.0.1:{master.port}/status").json()
    assert status["node"] == master.node_id and status["role"] == "master" and status["serving"]
    assert status["epoch"] >= 1 and status["since_unix_s"] > 0
    assert httpx.head(f"http://127.0.0.1:{master.port}/master").status_code == 200
    slave = next(node for node in nodes if node is not master)
    assert httpx.head(f"http://127.0.0.1:{slave.port}/master").status_code == 503
    assert httpx.get(f"http://127.0.0.1:{slave.port}/status").json()["role"] == "slave"


def test_sigkill_of_the_master_makes_another_node_master(group: Group) -> None:
    nodes = group.start_many(3)
    old = group.wait_for_master()
    old_epoch = httpx.get(f"http://127.0.0.1:{old.port}/status").json()["epoch"]
    old.signal(signal.SIGKILL)
    new = group.wait_for_master(exclude={old.node_id})
    survivors = [node for node in nodes if node is not old]
    assert {n.node_id: n.status("/master") for n in survivors} == {
        n.node_id: (200 if n is new else 503) for n in survivors
    }
    assert httpx.get(f"http://127.0.0.1:{new.port}/status").json()["epoch"] == old_epoch + 1


def test_sigterm_hands_over_without_waiting_for_a_poll_interval(group: Group) -> None:
    # Slaves poll only once a minute: a takeover within the test's wait proves
    # the handover did not wait for a poll.
    nodes = group.start_many(3, "--lock-acquire-sleep-interval-ms", "60000")
    old = group.wait_for_master()
    old.signal(signal.SIGTERM)
    new = group.wait_for_master(timeout_s=20, exclude={old.node_id})
    assert new is not old
    assert old.process.wait(10) == 0
    assert "PRIMACY-1004" in old.log()  # released the lock
    assert len([n for n in nodes if n.alive()]) == 2


# Promise 1 (docs/safety.md): a master claims the role only while its last passed lease
# check started less than one keepalive period K ago; /master decides at request time.
# After the lock file is deleted or replaced no lease check can pass, so the last passed
# one started before the change and the old master's claim ends at most K after it.
KEEPALIVE_S = 1.0  # long beside the poller's gaps, so "within K" is not lost in poll noise
# The poller re-asks at once on a kept-alive connection (an answer takes milliseconds);
# 0.2 s covers a scheduling stall on a loaded two-core machine between two polls.
POLL_SLACK_S = 0.2


def _epoch(node: NodeProcess) -> int:
    epoch = httpx.get(f"http://127.0.0.1:{node.port}/status").json()["epoch"]
    assert isinstance(epoch, int)
    return epoch


def _decided(poller: MasterPoller, node: NodeProcess) -> list[Answer]:
    """The node's answers that carry a decision time, in decision order."""
    answers = [a for a in poller.answers if a.node_id == node.node_id and a.decided_at is not None]
    return sorted(answers, key=lambda a: a.decided_at or 0.0)


@pytest.mark.parametrize("how", ["delete", "replace"])
def test_master_demotes_within_one_keepalive_when_its_lock_file_is_deleted_or_replaced(
    group: Group, share: Path, how: str
) -> None:
    keepalive = ("--lock-keep-alive-period-ms", str(round(KEEPALIVE_S * 1000)))
    nodes = group.start_many(2, *keepalive)
    old = group.wait_for_master()
    old_epoch = _epoch(old)
    with MasterPoller(nodes) as poller:
        wait_until(
            lambda: any(a.status == 200 for a in _decided(poller, old)), 5, "the poller to see it"
        )
        if how == "delete":
            (share / LOCK_FILE_NAME).unlink()
        else:
            (share / "replacement").write_text("")
            os.replace(share / "replacement", share / LOCK_FILE_NAME)
        changed_at = time.monotonic()  # after the change: its end of tenure is no later
        wait_until(lambda: "PRIMACY-1003" in old.log(), 10, "the old master to demote")
        group.wait_for_master(timeout_s=15)
    tenure_ends = changed_at + KEEPALIVE_S
    answers = _decided(poller, old)
    late = [
        a
        for a in answers
        if a.status == 200 and a.epoch == old_epoch and (a.decided_at or 0.0) >= tenure_ends
    ]
    assert late == [], f"claimed epoch {old_epoch} more than one keepalive after the change"
    first_503 = next(a for a in answers if a.status == 503 and (a.decided_at or 0.0) > changed_at)
    assert first_503.decided_at is not None
    assert first_503.decided_at - changed_at <= KEEPALIVE_S + POLL_SLACK_S, first_503
    assert poller.two_masters() == []
    assert "lock file" in old.log().split("PRIMACY-1003", 1)[1].splitlines()[0]


def test_frozen_master_whose_lock_file_was_replaced_never_serves_again(
    group: Group, share: Path
) -> None:
    keepalive = ("--lock-keep-alive-period-ms", str(round(KEEPALIVE_S * 1000)))
    nodes = group.start_many(2, *keepalive)
    old = group.wait_for_master()
    old_epoch = _epoch(old)
    other = next(node for node in nodes if node is not old)
    with MasterPoller(nodes) as poller:
        wait_until(
            lambda: any(a.status == 200 for a in _decided(poller, old)), 5, "the poller to see it"
        )
        old.signal(signal.SIGSTOP)
        (share / "replacement").write_text("")
        os.replace(share / "replacement", share / LOCK_FILE_NAME)
        replaced_at = time.monotonic()
        wait_until(other.is_master, 15, "the other node to take over")
        thawed_at = time.monotonic()
        old.signal(signal.SIGCONT)
        wait_until(lambda: "PRIMACY-1003" in old.log(), 10, "the old master to demote")
        wait_until(
            lambda: any((a.decided_at or 0.0) > thawed_at for a in _decided(poller, old)),
            5,
            "an answer the old master decided after SIGCONT",
        )
        time.sleep(0.5)
    # Judged by when the old master decided, not when its answer arrived: a 200 decided
    # before SIGSTOP and delivered after SIGCONT is stale, not a claim (docs/safety.md).
    # Its last passed lease check started before the replacement, so any 200 it decided
    # one keepalive after the replacement (that is every one after SIGCONT: the other node
    # took over, which takes over a keepalive) is a violation.
    assert thawed_at >= replaced_at + KEEPALIVE_S
    answers = _decided(poller, old)
    late_claims = [
        a for a in answers if a.status == 200 and (a.decided_at or 0.0) >= replaced_at + KEEPALIVE_S
    ]
    assert late_claims == []
    assert any(a.status == 200 and a.epoch == old_epoch for a in answers)  # it was polled
    resumed = [a for a in answers if (a.decided_at or 0.0) > thawed_at]
    assert resumed and resumed[0].status == 503  # the first decision after SIGCONT
    assert poller.two_masters() == []
    assert other.is_master() and not old.is_master()


def test_priority_never_never_becomes_master(group: Group) -> None:
    bystander = group.start("bystander", "--priority", "never")
    candidate = group.start("candidate")
    assert group.wait_for_master() is candidate
    # Answering as a slave before the kill: the loop below judges only what follows it.
    wait_until(lambda: bystander.status("/master") == 503, 20, "the bystander answers")
    candidate.signal(signal.SIGKILL)
    candidate.process.wait(10)
    deadline = time.monotonic() + 2.0  # twenty poll intervals
    while time.monotonic() < deadline:
        assert bystander.status("/master") == 503
        time.sleep(0.05)
    assert httpx.get(f"http://127.0.0.1:{bystander.port}/status").json()["role"] == "slave"


def test_higher_priority_node_wins_a_free_lock(group: Group) -> None:
    # Both wait for the lock; when it frees, the `highest` node goes first.
    holder = group.start("holder", "--priority", "highest")
    group.wait_for_master()
    low = group.start("low", "--priority", "normal")
    high = group.start("high", "--priority", "highest")
    wait_until(
        lambda: low.status("/slave") == 200 and high.status("/slave") == 200, 20, "two slaves"
    )

    def low_sees_high() -> bool:  # what low's role loop decides with, from its registry read
        members = httpx.get(f"http://127.0.0.1:{low.port}/cluster").json()["members"]
        return any(
            m["node_id"] == "high" and m["live"] and m["priority"] == "highest" for m in members
        )

    wait_until(low_sees_high, 20, "the low-priority node to see the high one in the registry")
    holder.signal(signal.SIGKILL)
    assert group.wait_for_master(exclude={"holder"}) is high


def test_fifty_takeovers_never_show_two_masters(group: Group) -> None:
    nodes = group.start_many(3)
    with MasterPoller(nodes) as poller:
        for _ in range(50):
            # Restarts overlap the next takeover; keep a slave ready to take over.
            wait_until(
                lambda: sum(n.status("/health") == 200 for n in group.alive()) >= 2,
                20,
                "two running nodes",
            )
            old = group.wait_for_master()
            old.signal(signal.SIGKILL)
            old.process.wait(10)
            new = group.wait_for_master(exclude={old.node_id})
            epoch = int(httpx.get(f"http://127.0.0.1:{new.port}/status").json()["epoch"])
            # The poller judged this master too (not a count that depends on speed).
            wait_until(
                lambda epoch=epoch: epoch in poller.epochs_seen_serving(), 10, f"epoch {epoch}"
            )
            poller.add(group.start(old.node_id))
    assert poller.two_masters() == []
    assert len(poller.epochs_seen_serving()) >= 50


def test_role_changes_are_journaled_and_status_shows_the_journal(group: Group, share: Path) -> None:
    nodes = group.start_many(2)
    first = group.wait_for_master()
    journal = httpx.get(f"http://127.0.0.1:{first.port}/status").json()["journal"]
    assert journal["sync_policy"] == "sync" and journal["epoch"] == 1
    assert journal["fenced_records"] == 0 and journal["damaged_batches"] == 0
    slave = next(node for node in nodes if node is not first)
    assert httpx.get(f"http://127.0.0.1:{slave.port}/status").json()["journal"] is None
    first.signal(signal.SIGTERM)
    assert first.process.wait(15) == 0
    second = group.wait_for_master(exclude={first.node_id})
    second.signal(signal.SIGKILL)
    second.process.wait(10)
    records: list[dict[str, object]] = []
    tools.dump(share, records.append)
    controls = [
        (r["epoch"], r["event"]["node"], r["event"]["to"])  # type: ignore[index]
        for r in records
        if r["type"] == "CONTROL"
    ]
    assert controls == [
        (1, first.node_id, "master"),
        (1, first.node_id, "stopping"),
        (2, second.node_id, "master"),
    ]
    fences = [r for r in records if r["type"] == "FENCE"]
    assert [r["epoch"] for r in fences] == [1, 2]
