"""Hostile content in a share record decodes to None or to the safe default, never raises."""

from __future__ import annotations

import json

import pytest

from primacy.share.records import (
    EpochRecord,
    HolderInfo,
    NodeEntry,
    ProcessIdentity,
    RoleChange,
    Switchover,
)

IDENTITY = {
    "boot_id": "0123abcd-0123-4567-89ab-0123456789ab",
    "pid_namespace": "pid:[4026531836]",
    "pid": 42,
    "start_ticks": 7,
}


def _epoch(content: object) -> EpochRecord | None:
    return EpochRecord.from_bytes(5, json.dumps(content).encode())


def test_an_epoch_record_survives_its_round_trip() -> None:
    record = EpochRecord(
        5,
        node_id="a",
        host="h",
        pid=9,
        claimed_unix_s=1.5,
        process=ProcessIdentity(**IDENTITY),
        outlasted=True,
        released=True,
        lock_keep_alive_period_ms=250,
        exec_child=False,
    )
    assert EpochRecord.from_bytes(5, record.to_bytes()) == record


@pytest.mark.parametrize("data", [b"", b"[1]", b"\xff", b"[" * 100_000, b'"text"', b"null"])
def test_an_epoch_file_that_is_no_json_object_is_no_record(data: bytes) -> None:
    assert EpochRecord.from_bytes(1, data) is None


def test_the_number_is_the_files_name_not_what_the_record_says() -> None:
    record = _epoch({"epoch": 99, "node_id": "a"})
    assert record is not None and record.epoch == 5


def test_a_record_from_before_the_outlasted_term_counts_as_outlasted() -> None:
    record = _epoch({"node_id": "legacy"})
    assert record is not None and record.outlasted and not record.released


@pytest.mark.parametrize("value", [1, "yes", None, [True], {"a": 1}])
def test_an_outlasted_term_that_is_not_a_bool_makes_the_next_master_wait_longer(
    value: object,
) -> None:
    # Not outlasted: the next claimant walks on to earlier claims and waits for them too.
    record = _epoch({"outlasted": value})
    assert record is not None and record.outlasted is False


@pytest.mark.parametrize("value", [1, "true", "yes", None, [True]])
def test_only_a_released_term_of_exactly_true_hands_over(value: object) -> None:
    record = _epoch({"released": value})
    assert record is not None and record.released is False


@pytest.mark.parametrize("value", [True, "250", -1, None, [250], 10**400])
def test_a_keepalive_that_is_no_finite_non_negative_number_is_not_taken(value: object) -> None:
    record = _epoch({"lock_keep_alive_period_ms": value})
    assert record is not None and record.lock_keep_alive_period_ms is None


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_json_extensions_for_unbounded_numbers_are_not_taken(text: str) -> None:
    data = f'{{"lock_keep_alive_period_ms": {text}, "claimed_unix_s": {text}}}'.encode()
    record = EpochRecord.from_bytes(1, data)
    assert record is not None
    assert record.lock_keep_alive_period_ms is None and record.claimed_unix_s is None


@pytest.mark.parametrize("value", [1, "false", None])
def test_an_exec_child_term_that_is_not_a_bool_says_nothing(value: object) -> None:
    record = _epoch({"exec_child": value})
    assert record is not None and record.exec_child is None


@pytest.mark.parametrize(
    "change",
    [
        {"boot_id": "../../etc"},
        {"pid_namespace": "pid:[x]"},
        {"pid": True},
        {"pid": 0},
        {"pid": 2**40},
        {"pid": "12"},
        {"start_ticks": -1},
        {"start_ticks": 1.5},
    ],
)
def test_a_process_identity_is_exactly_what_a_node_writes_or_nothing(
    change: dict[str, object],
) -> None:
    assert ProcessIdentity.from_json(IDENTITY) == ProcessIdentity(**IDENTITY)  # type: ignore[arg-type]
    assert ProcessIdentity.from_json({**IDENTITY, **change}) is None
    record = _epoch({"process": {**IDENTITY, **change}})
    assert record is not None and record.process is None


@pytest.mark.parametrize(
    "data",
    [b"", b"{}", b"[]", b'{"node_id": "a"}', b'{"node_id": "a", "host": "h", "pid": "x"}'],
)
def test_a_holder_record_that_is_not_ours_is_none(data: bytes) -> None:
    assert HolderInfo.from_bytes(data) is None


def test_a_holder_record_survives_its_round_trip() -> None:
    holder = HolderInfo("a", "h", 3, 1.0, 4, released=True)
    assert HolderInfo.from_bytes(holder.to_bytes()) == holder


def test_a_node_entry_missing_a_field_or_with_a_wrong_one_is_none() -> None:
    entry = NodeEntry("a", "h", 1, "127.0.0.1:1", "normal", "slave", None, 1.0)
    assert NodeEntry.from_json(entry.to_json()) == entry
    assert NodeEntry.from_json({**entry.to_json(), "pid": "one"}) is None
    assert NodeEntry.from_json({k: v for k, v in entry.to_json().items() if k != "role"}) is None


def test_a_switchover_marker_is_bounded_in_time() -> None:
    now = 1000.0
    honest = Switchover("a", "b", 3, now + 15)
    assert Switchover.from_json(honest.to_json(), now) == honest
    assert Switchover.from_json({**honest.to_json(), "until_unix_s": now + 10**9}, now) is None
    assert Switchover.from_json({**honest.to_json(), "until_unix_s": float("nan")}, now) is None
    assert Switchover.from_json({**honest.to_json(), "epoch": "x"}, now) is None


def test_a_role_change_is_read_back_as_written_and_other_events_are_not_one() -> None:
    change = RoleChange("a", "acquired", "master", 3, "serving")
    assert RoleChange.from_json(change.to_json()) == change
    assert RoleChange.from_json({"event": "checkpoint"}) is None
    odd = RoleChange.from_json({"event": "role", "node": 5, "epoch": "x", "to": "MASTER"})
    assert odd == RoleChange(None, "", "MASTER", None, None)


@pytest.mark.parametrize("when", ["NaN", "Infinity", "1e999", "-1e999"])
def test_a_registry_entry_or_holder_with_no_real_time_is_not_read(when: str) -> None:
    """Issue 27: NaN as a registry entry's time made ``primacy status --share`` end in a
    traceback (``time.localtime(nan)``); a time no clock shows makes the record unreadable."""
    entry = (
        '{"node_id": "n", "host": "h", "pid": 1, "http": "x", "priority": "normal", '
        f'"role": "slave", "epoch": 1, "updated_unix_s": {when}}}'
    )
    assert NodeEntry.from_json(json.loads(entry)) is None
    holder = f'{{"node_id": "n", "host": "h", "pid": 1, "since_unix_s": {when}, "epoch": 1}}'
    assert HolderInfo.from_bytes(holder.encode()) is None
