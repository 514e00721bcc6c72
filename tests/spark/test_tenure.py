"""Tenures and gaps from role records, epoch claims and per-epoch facts, without Spark."""

from __future__ import annotations

import json
from pathlib import Path

from primacy.share.memory import MemoryShare
from primacy.share.records import EpochRecord, Role
from primacy.spark.tenure import (
    CRASHED,
    GRACEFUL,
    NEVER_SERVED,
    SERVING,
    EpochClaim,
    EpochFacts,
    RoleEvent,
    build_gaps,
    build_tenures,
    claims_from,
    read_epoch_claims,
    role_event_from_control,
)

S = 1_000_000_000  # nanoseconds per second


def facts(epoch: int, first_s: int, last_s: int, message_s: int | None = None) -> EpochFacts:
    message = None if message_s is None else message_s * S
    return EpochFacts(epoch, f"node-{epoch}", first_s * S, last_s * S, message, records=10)


def became_master(epoch: int, at_s: int) -> RoleEvent:
    return RoleEvent(epoch, f"node-{epoch}", "ACQUIRED", "MASTER", "lock acquired", at_s * S)


def test_a_graceful_stop_ends_the_tenure_at_its_stop_record_and_the_gap_runs_to_the_next() -> None:
    events = [
        became_master(1, 10),
        RoleEvent(1, "node-1", "MASTER", "STOPPING", "shutdown", 50 * S),
        became_master(2, 58),
    ]
    tenures = build_tenures({1: facts(1, 9, 50), 2: facts(2, 55, 90)}, {}, events)
    assert [(t.how_ended, t.ended_unix_ns) for t in tenures] == [
        (GRACEFUL, 50 * S),
        (SERVING, None),
    ]
    [gap] = build_gaps(tenures)
    assert (gap.from_unix_ns, gap.to_unix_ns, gap.duration_s) == (50 * S, 58 * S, 8.0)
    assert gap.longest_duration_s == 8.0


def test_a_crash_ends_at_the_next_claim_and_the_gap_may_reach_back_to_its_last_record() -> None:
    claims = {2: EpochClaim(2, "node-2", 70 * S)}
    events = [became_master(1, 10), became_master(2, 75)]
    tenures = build_tenures({1: facts(1, 9, 40), 2: facts(2, 72, 90)}, claims, events)
    assert (tenures[0].how_ended, tenures[0].ended_unix_ns) == (CRASHED, 70 * S)
    [gap] = build_gaps(tenures)
    assert (gap.duration_s, gap.longest_duration_s, gap.cause) == (5.0, 35.0, CRASHED)


def test_without_claims_or_role_records_the_fence_and_first_message_stand_in() -> None:
    tenures = build_tenures({1: facts(1, 0, 40, 1), 2: facts(2, 60, 90, 61)}, {}, [])
    assert [(t.serving_from_unix_ns, t.ended_unix_ns) for t in tenures] == [
        (1 * S, 60 * S),
        (61 * S, None),
    ]


def test_an_epoch_claimed_but_never_serving_is_shown_and_the_gap_spans_it() -> None:
    claims = {2: EpochClaim(2, "node-2", 50 * S), 3: EpochClaim(3, "node-3", 80 * S)}
    events = [became_master(1, 10), became_master(3, 85)]
    tenures = build_tenures({1: facts(1, 9, 40), 3: facts(3, 81, 90)}, claims, events)
    assert [t.how_ended for t in tenures] == [CRASHED, NEVER_SERVED, SERVING]
    [gap] = build_gaps(tenures)
    assert (gap.after_epoch, gap.before_epoch, gap.duration_s) == (1, 3, 35.0)


def test_a_stop_with_no_successor_leaves_an_open_gap() -> None:
    events = [became_master(1, 10), RoleEvent(1, "node-1", "MASTER", "DEMOTING", None, 30 * S)]
    [gap] = build_gaps(build_tenures({1: facts(1, 9, 30)}, {}, events))
    assert (gap.before_epoch, gap.to_unix_ns, gap.duration_s) == (None, None, None)


def test_epoch_claims_are_read_from_the_epochs_directory(tmp_path: Path) -> None:
    (tmp_path / "epochs").mkdir()
    (tmp_path / "epochs" / "1").write_text(json.dumps({"node_id": "a", "claimed_unix_s": 1.5}))
    (tmp_path / "epochs" / "2").write_text("{torn")
    claims = read_epoch_claims(tmp_path)
    assert claims == {1: EpochClaim(1, "a", 1_500_000_000), 2: EpochClaim(2, None, None)}


def test_only_role_events_become_role_changes() -> None:
    assert role_event_from_control({"event": "checkpoint"}, 1, 5) is None
    event = role_event_from_control({"event": "role", "from": "A", "to": "MASTER"}, 3, 5)
    assert event == RoleEvent(3, None, "A", "MASTER", None, 5)


def test_epoch_claims_are_read_through_the_port_of_a_group_kept_elsewhere(tmp_path: Path) -> None:
    """A group whose epochs live on a coordinator (ZooKeeper; here the in-memory share, for
    speed: tests/spark/test_zookeeper_replay.py reads a real ensemble): the share has no
    epochs/, and the claims are the port's."""
    group = MemoryShare()
    for node in ("a", "b"):
        group.handle().claim_epoch(EpochRecord(0, node_id=node, claimed_unix_s=7.0))
    expected = {1: EpochClaim(1, "a", 7 * S), 2: EpochClaim(2, "b", 7 * S)}
    assert read_epoch_claims(group.handle()) == expected
    assert read_epoch_claims(tmp_path) == {}  # the share's own epochs/: none
    with claims_from(group.handle()):
        assert read_epoch_claims(tmp_path) == expected  # what the replay job asks for
    assert read_epoch_claims(tmp_path) == {}


def test_a_switchover_journaled_as_demoting_ends_the_tenure_gracefully() -> None:
    events = [
        became_master(1, 10),
        RoleEvent(1, "node-1", Role.MASTER, Role.DEMOTING, "switchover to node-2", 50 * S),
        RoleEvent(2, "node-2", Role.ACQUIRED, Role.MASTER, "serving", 51 * S),
    ]
    tenures = build_tenures({1: facts(1, 9, 50), 2: facts(2, 51, 90)}, {}, events)
    assert (tenures[0].how_ended, tenures[0].end_reason) == (
        GRACEFUL,
        "master -> demoting: switchover to node-2",
    )
