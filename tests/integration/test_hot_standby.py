"""A hot standby with real supervisors: the slave follows the journal, a takeover reads the tail.

What a user sees: the new master's ``/status`` says how it opened the journal
(``journal.opened_from``) and its log has the code; whatever it opened from, every
message whose RECEIPT arrived is served by it. The damaged cases change the share
while the slave is frozen (SIGSTOP) and the master killed, so the slave's next look
at the journal comes after the change: the order is fixed, no sleep decides it.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from primacy.client.consumer import Consumer
from primacy.client.producer import Producer
from primacy.store import format as fmt
from primacy.store.segments import list_segments, open_segment, scan_segment
from tests.harness.checker import assert_ok, check
from tests.harness.group import Group, NodeProcess, wait_until
from tests.harness.traffic import StompGroup, Traffic

pytestmark = pytest.mark.slow

QUEUE = "/queue/hot"


def status(node: NodeProcess) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=5).json()
    return answer


def follower(node: NodeProcess) -> dict[str, Any]:
    """The follower part of ``/status``; empty while the node does not answer yet."""
    try:
        return status(node)["follower"] or {}
    except httpx.HTTPError:
        return {}


def journal_bytes(share: Path) -> int:
    return sum(s.path.stat().st_size for s in list_segments(share / "journal"))


def wait_caught_up(slave: NodeProcess, share: Path) -> None:
    """Until the slave's follower has applied every byte the journal holds."""
    wait_until(
        lambda: follower(slave).get("position_bytes") == journal_bytes(share),
        60,
        "the slave's follower to reach the journal's end",
    )


def test_a_takeover_after_a_busy_run_is_served_from_the_followed_state(
    group: Group, share: Path
) -> None:
    stomp = StompGroup(group.start, 2)
    old = group.wait_for_master(timeout_s=30)
    slave = next(node for node in stomp.nodes.values() if node is not old)
    with Traffic(stomp.url, producers=2, interval_s=0.002) as traffic:
        assert traffic.wait_for_acknowledged(400, 60)
        followed = follower(slave)
        assert followed["mode"] == "following" and followed["position_bytes"] > 0
        metrics = httpx.get(f"http://127.0.0.1:{slave.port}/metrics", timeout=5).text
        assert "primacy_journal_follower_without_state 0.0" in metrics
        assert "primacy_journal_follow_lag_seconds" in metrics
        old.signal(signal.SIGKILL)
        new = group.wait_for_master(timeout_s=30, exclude={old.node_id})
        assert traffic.wait_for_acknowledged(50, 30), "the new master acknowledged nothing"
    journal = status(new)["journal"]
    assert journal["opened_from"] == "followed", journal["open_fallback"]
    assert journal["bytes_read_at_open"] < followed["position_bytes"]
    assert "PRIMACY-1415" in new.log()
    assert_ok(check(traffic, share))
    again = stomp.start(old.node_id)  # a slave again: it follows the new master's journal
    wait_until(
        lambda: follower(again).get("mode") == "following",
        30,
        "the restarted node to follow",
    )


def _replace_last_segment(share: Path) -> None:
    """The same bytes in another file under the name: a segment replaced under the follower."""
    last = list_segments(share / "journal")[-1].path
    copy = last.with_name(".replacement")
    shutil.copyfile(last, copy)
    os.replace(copy, last)


def _truncate_the_deliveries(share: Path) -> None:
    """Cut the last segment before its trailing batches of DELIVER records only (what the
    master wrote as it handed messages to a consumer): shorter than what the slave read, and
    no SEND or ACK lost."""
    segment = list_segments(share / "journal")[-1]
    with open_segment(segment.path) as source:
        scan = scan_segment(segment, source)
        cut = None
        for batch in reversed(scan.batches):
            view = source.read(batch.offset, batch.header.batch_len)
            kinds = {kind for kind, _, _, _ in fmt.record_keys(view)}
            if kinds != {fmt.RecordType.DELIVER}:
                break
            cut = batch.offset
    assert cut is not None, "no trailing DELIVER batch to cut"
    os.truncate(segment.path, cut)


@pytest.mark.parametrize(
    ("change", "reason"),
    [(_replace_last_segment, "replaced"), (_truncate_the_deliveries, "truncated")],
)
def test_a_follower_whose_journal_changed_falls_back_and_serves_everything_receipted(
    group: Group, share: Path, change: Any, reason: str
) -> None:
    stomp = StompGroup(group.start, 2)
    old = group.wait_for_master(timeout_s=30)
    slave = next(node for node in stomp.nodes.values() if node is not old)
    producer = Producer(stomp.url, window=16)
    receipted = [producer.send(QUEUE, f"body {n}".encode()) for n in range(300)]
    producer.flush()
    producer.close()
    consumer = Consumer(stomp.url, QUEUE)  # receives, never acks: DELIVER records only
    assert all(consumer.receive(10) is not None for _ in range(20))
    wait_caught_up(slave, share)
    with slave.stopped():
        old.signal(signal.SIGKILL)
        consumer.close()
        change(share)
    new = group.wait_for_master(timeout_s=60, exclude={old.node_id})
    dropped = status(new)["follower"]
    journal = status(new)["journal"]
    # Seen after the claim (the takeover runs the full recovery) or by a poll just before it
    # (the follower then started again from a full recovery): dropped either way.
    assert dropped["fallbacks"] >= 1 and reason in dropped["last_fallback"], dropped
    assert journal["opened_from"] == "full_recovery" or dropped["mode"] == "handed_over"
    assert "PRIMACY-1414" in new.log()
    served = Consumer(stomp.url, QUEUE)
    seen: set[str] = set()
    while len(seen) < len(receipted):
        message = served.receive(10)
        assert message is not None, f"{len(receipted) - len(seen)} receipted messages missing"
        seen.add(message.message_id)
        served.ack(message, wait=False)
    served.close()
    assert seen == set(receipted)
