"""The checker flags what it must: acks past a fence, duplicates, losses, two masters."""

from __future__ import annotations

from pathlib import Path

from primacy.store.config import StoreConfig
from primacy.store.journal import JournalStore
from tests.harness.checker import check
from tests.harness.group import Answer, MasterPoller
from tests.harness.traffic import Traffic


def _open(share: Path, node_id: str, epoch: int) -> JournalStore:
    # A fencing check that always passes: a broken master that acknowledges past a fence.
    return JournalStore.open(
        StoreConfig(share=share, node_id=node_id), epoch=epoch, fencing_check=lambda: None
    )


def _saw(acknowledged: set[str], consumed: set[str]) -> Traffic:
    traffic = Traffic("failover:(tcp://127.0.0.1:9)", producers=0)  # never started
    traffic.acknowledged = set(acknowledged)
    traffic.receipt_times_ns = dict.fromkeys(acknowledged, 0)
    traffic.consumed.update(consumed)
    return traffic


def test_a_correct_run_passes(tmp_path: Path) -> None:
    store = _open(tmp_path, "a", 1)
    store.append_send("/queue/q", "m1", b"x").result()
    store.close()
    verdict = check(_saw({"m1"}, {"m1"}), tmp_path)
    assert verdict.ok, verdict.violations


def test_an_acknowledgement_past_the_fence_a_duplicate_and_a_loss_are_all_flagged(
    tmp_path: Path,
) -> None:
    old = _open(tmp_path, "a", 1)
    old.append_send("/queue/q", "before-fence", b"x").result()
    new = _open(tmp_path, "b", 2)  # fences epoch 1 here
    old.append_send("/queue/q", "past-fence", b"x").result()  # "acknowledged" by the broken check
    new.append_send("/queue/q", "before-fence", b"x").result()  # stored a second time
    new.append_send("/queue/q", "never-consumed", b"x").result()
    old.close()
    new.close()
    acknowledged = {"before-fence", "past-fence", "never-consumed"}
    verdict = check(_saw(acknowledged, {"before-fence", "past-fence"}), tmp_path)
    assert [v.split()[0] for v in verdict.fencing] == ["past-fence"]
    assert [v.split()[0] for v in verdict.duplicates] == ["before-fence"]
    assert [v.split()[0] for v in verdict.lost] == ["never-consumed"]
    assert verdict.fenced_records >= 1 and not verdict.ok


def test_an_older_epoch_deciding_200_after_a_newer_one_is_flagged(tmp_path: Path) -> None:
    _open(tmp_path, "a", 1).close()
    poller = MasterPoller([])
    poller.answers = [
        Answer("n1", 1.0, 1.01, 200, epoch=1, decided_at=1.005),
        Answer("n2", 1.1, 1.11, 200, epoch=2, decided_at=1.105),
        Answer("n1", 1.0, 1.3, 200, epoch=1, decided_at=1.2),  # n1 still claims: two masters
    ]
    verdict = check(_saw(set(), set()), tmp_path, poller)
    assert len(verdict.two_masters) == 1 and not verdict.ok
    assert "n1 (epoch 1) decided 200" in verdict.two_masters[0]


def test_a_200_decided_before_the_takeover_but_delivered_late_is_not_two_masters(
    tmp_path: Path,
) -> None:
    _open(tmp_path, "a", 1).close()
    poller = MasterPoller([])
    poller.answers = [
        # n1 decided at 1.005, then was frozen (SIGSTOP) before writing its answer.
        Answer("n1", 1.0, 2.5, 200, epoch=1, decided_at=1.005),
        Answer("n2", 1.6, 1.61, 200, epoch=2, decided_at=1.605),
        Answer("n2", 2.0, 2.01, 200, epoch=2, decided_at=2.005),
        Answer("n1", 2.5, 2.51, 503, epoch=1, decided_at=2.505),
    ]
    assert check(_saw(set(), set()), tmp_path, poller).two_masters == []


def test_two_nodes_claiming_one_epoch_are_flagged(tmp_path: Path) -> None:
    _open(tmp_path, "a", 1).close()
    poller = MasterPoller([])
    poller.answers = [
        Answer("n1", 1.0, 1.01, 200, epoch=3, decided_at=1.005),
        Answer("n2", 1.1, 1.11, 200, epoch=3, decided_at=1.105),
    ]
    assert len(check(_saw(set(), set()), tmp_path, poller).two_masters) == 1


def test_a_stray_reply_and_a_request_never_answered_are_flagged(tmp_path: Path) -> None:
    """The request/reply pair of the chaos traffic: a receipted request is a queue message
    (lost if the replier never got it); besides, every reply must answer a request asked,
    and every request be answered once the faults are over."""
    store = _open(tmp_path, "a", 1)
    for request in ("req-1.1", "req-2.1"):
        store.append_send("/queue/requests", request, b"x").result()
    store.close()
    traffic = Traffic("failover:(tcp://127.0.0.1:9)", producers=0, request_reply=True)
    traffic.acknowledged = {"req-1.1", "req-2.1"}
    traffic.request_ids = set(traffic.acknowledged)
    traffic.consumed.update({"req-1.1"})
    assert traffic.requester is not None
    traffic.requester.asked = {"req-1", "req-2"}
    traffic.requester.answers["req-1"] += 1
    traffic.requester.strays.append("reply b'?' for correlation-id 'req-9'")
    verdict = check(traffic, tmp_path)
    assert [v.split()[0] for v in verdict.lost] == ["req-2.1"]
    assert verdict.request_reply == [
        "stray reply b'?' for correlation-id 'req-9'",
        "request req-2 unanswered after the faults",
    ]
    assert (verdict.requests_acknowledged, verdict.answered) == (2, 1) and not verdict.ok
