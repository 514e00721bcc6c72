"""``primacy replay --incremental``: each run reads only what is new and the tables come out as a
full replay's of the same journal, through growth, new segments, a crash before the state file
was written, and retention removing segments already read.

The Spark tests compare every incremental result with a full (non-incremental)
replay of the same journal: records counted by status, and the messages table.
The planning and the state file are checked without Spark.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from primacy.cli import replay as replay_cli
from primacy.spark import replay_state
from primacy.spark.journal_plan import SegmentPlan
from primacy.spark.replay import ReplayOptions, run
from primacy.spark.replay_state import ReplayState, SegmentRead, next_run
from primacy.store.config import StoreConfig
from primacy.store.journal import JournalStore
from primacy.store.segments import list_segments
from tests.spark.journal_scenario import write_failover_journal
from tests.spark.test_segment_reader import batch_offsets

SEGMENT_BYTES = 4096  # several segments per epoch, some sealed, one growing


# ---------------------------------------------------------------- without Spark


def plan(name_epoch: int, size: int, fence_limit: int | None = None) -> SegmentPlan:
    return SegmentPlan(
        path=f"/share/journal/{name_epoch:010d}-{1:020d}.seg", epoch=name_epoch,
        first_sequence=1, fence_limit=fence_limit, is_epoch_tail=True, size_bytes=size,
    )  # fmt: skip


def read_before(p: SegmentPlan, settled: int, provisional: bool = False) -> SegmentRead:
    return SegmentRead(
        epoch=p.epoch, first_sequence=1, size_read=p.size_bytes, settled_up_to=settled,
        provisional=provisional, fence_limit=p.fence_limit, is_epoch_tail=True,
    )  # fmt: skip


def test_the_next_run_reads_new_segments_new_bytes_and_open_ends_and_redoes_what_a_fence_cut() -> (
    None
):
    new, same, grown, torn, cut, shrunk = (plan(e, 1000) for e in range(1, 7))
    state = ReplayState(
        share="/share",
        loads=(1, 2),
        open_load=2,
        next_load=3,
        segments={
            same.name: read_before(same, 1000),
            grown.name: read_before(grown, 600),
            torn.name: read_before(torn, 900, provisional=True),
            cut.name: read_before(cut, 1000),
            shrunk.name: read_before(shrunk, 1000),
        },
    )
    cut_now = replace(cut, fence_limit=700)  # a new master found the old tail shorter
    shrunk_now = replace(shrunk, size_bytes=800)
    planned = next_run(state, [new, same, grown, torn, cut_now, shrunk_now])
    starts = {p.name: p.range_start for p in planned.reads}
    assert starts == {new.name: 0, grown.name: 600, torn.name: 900, cut.name: 0, shrunk.name: 0}
    assert planned.redo == {cut.name, shrunk.name}
    assert (planned.final_load, planned.provisional_load) == (3, 4)
    # A fence at or past what was settled changes nothing already read, nor does one that
    # was already applied when it was read (a stale master's segment).
    assert next_run(state, [replace(same, fence_limit=1000)]).reads == []
    fenced = replace(same, fence_limit=400)
    applied = replace(state, segments={same.name: read_before(fenced, 1000)})
    assert next_run(applied, [fenced]).reads == []
    # A fence that is gone (its batch damaged, the checkpoint's copy pruned) is a change too.
    assert next_run(applied, [same]).redo == {same.name}


def test_the_state_file_round_trips_and_a_crashed_runs_loads_are_removed(tmp_path: Path) -> None:
    state = ReplayState(
        share="/share", loads=(1, 3), open_load=3, next_load=5,
        segments={"s": SegmentRead(1, 1, 100, 90, True, None, True)},
    )  # fmt: skip
    for load in (1, 3, 4):  # 4: written by a run that died before its state
        (tmp_path / "records" / f"load={load}" / "date=2026-11-25").mkdir(parents=True)
    (tmp_path / "records" / "_temporary").mkdir()
    replay_state.write_state(tmp_path, state)
    assert replay_state.read_state(tmp_path, "/share") == state
    assert replay_state.remove_unlisted(tmp_path, state) == ["_temporary", "load=4"]
    assert sorted(p.name for p in (tmp_path / "records").iterdir()) == ["load=1", "load=3"]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="primacy")
    replay_cli.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["replay", *argv])


@pytest.mark.parametrize(
    ("state_text", "extra", "message"),
    [
        ("{not json", [], "is damaged"),
        (json.dumps({"version": 1, "share": "/elsewhere", "loads": [], "open_load": None,
                     "next_load": 1, "segments": {}}), [], "not of"),
        (None, ["--since", "2026-01-01"], "cannot be combined with --since"),
    ],
)  # fmt: skip
def test_an_out_directory_that_cannot_be_continued_is_refused_before_spark_starts(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    state_text: str | None,
    extra: list[str],
    message: str,
) -> None:
    monkeypatch.setattr(replay_cli, "missing_requirement", lambda: None)
    (tmp_path / "share" / "journal").mkdir(parents=True)
    out = tmp_path / "out"
    out.mkdir()
    if state_text is not None:
        (out / replay_state.STATE_FILE_NAME).write_text(state_text)
    args = parse(str(tmp_path / "share"), "--out", str(out), "--incremental", *extra)
    assert replay_cli.cmd_replay(args) == 2
    error = capsys.readouterr().err
    assert message in error
    if state_text is not None:
        assert "run without --incremental" in error


# ---------------------------------------------------------------- on Spark


def open_master(share: Path, epoch: int, node: str) -> JournalStore:
    config = StoreConfig(share=share, node_id=node, segment_max_bytes=SEGMENT_BYTES)
    return JournalStore.open(config, epoch=epoch, fencing_check=lambda: None)


def send(store: JournalStore, prefix: str, count: int, *, ack_every: int = 3) -> None:
    for i in range(count):
        store.append_send("orders", f"{prefix}{i}", f"body {prefix}{i}".encode() * 4).result(5)
    for i in range(0, count, ack_every):
        store.append_ack("orders", f"{prefix}{i}").result(5)


def replay(session: Any, share: Path, out: Path, *, incremental: bool) -> dict[str, Any]:
    options = ReplayOptions(share=str(share), out=str(out), quiet=True, incremental=incremental)
    return run(options, session)


def records(session: Any, out: Path) -> list[dict[str, Any]]:
    return [r.asDict() for r in session.read.parquet(str(out / "records")).collect()]


def tables(session: Any, out: Path) -> tuple[Counter[str], list[tuple[Any, ...]]]:
    """What must match a full replay: records by status, and the messages table."""
    by_status = Counter(row["status"] for row in records(session, out))
    rows = session.read.parquet(str(out / "messages")).collect()
    return by_status, sorted(tuple(row) for row in rows)


def assert_as_full_replay(session: Any, share: Path, out: Path, full_out: Path) -> None:
    """The tables of ``out`` are those a full replay of ``share`` makes: its records table,
    written as a run without --incremental writes it, and the messages paired from it (the
    full replay's two first steps; the others only read these, so they are not run)."""
    from primacy.spark.replay_records import read_records, write_continued
    from primacy.spark.replay_tables import messages

    write_continued(session, str(share), str(full_out), incremental=False)
    full_records = read_records(session, str(full_out))
    full = (
        Counter(row["status"] for row in full_records.collect()),
        sorted(tuple(row) for row in messages(full_records).collect()),
    )
    assert tables(session, out) == full
    seen = [(r["segment"], r["batch_offset"], r["sequence"]) for r in records(session, out)]
    assert len(seen) == len(set(seen))  # no record twice


def state_of(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / replay_state.STATE_FILE_NAME).read_text())
    return data


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    yield tmp_path / "share", tmp_path / "out", tmp_path / "full"


@pytest.mark.spark
@pytest.mark.slow
def test_a_growing_segment_is_read_from_where_the_last_run_stopped_and_new_segments_are_added(
    spark_session: Any, dirs: tuple[Path, Path, Path]
) -> None:
    share, out, full_out = dirs
    store = open_master(share, 1, "node-a")
    send(store, "a", 12)
    live = list_segments(share / "journal")[-1].path
    whole = live.read_bytes()
    live.write_bytes(whole[:-20])  # the run reads while a batch is half written
    replay(spark_session, share, out, incremental=True)
    live.write_bytes(whole)  # ... which the master then completes
    first = state_of(out)["segments"][live.name]
    assert first["provisional"] and first["settled_up_to"] < len(whole)
    assert "torn_tail" in {r["status"] for r in records(spark_session, out)}

    send(store, "b", 40)  # the live segment grows, then new ones follow
    store.close()
    successor = open_master(share, 2, "node-b")
    send(successor, "c", 10)
    successor.close()
    replay(spark_session, share, out, incremental=True)

    second = state_of(out)["segments"][live.name]
    assert second["settled_up_to"] > first["settled_up_to"] and not second["provisional"]
    later = [r for r in records(spark_session, out) if r["segment"] == live.name and r["load"] > 2]
    assert later and min(r["batch_offset"] for r in later) >= first["settled_up_to"]
    assert "torn_tail" not in {r["status"] for r in records(spark_session, out)}
    assert_as_full_replay(spark_session, share, out, full_out)


@pytest.mark.spark
@pytest.mark.slow
def test_a_crash_before_the_state_file_is_written_is_redone_without_counting_twice(
    spark_session: Any, dirs: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    share, out, full_out = dirs
    write_failover_journal(share)
    real_write = replay_state.write_state
    calls = []

    def crash_once(where: Path, state: ReplayState) -> None:
        calls.append(state)
        if len(calls) == 1:
            raise OSError("the machine went down before the state file was written")
        real_write(where, state)

    monkeypatch.setattr(replay_state, "write_state", crash_once)
    with pytest.raises(OSError, match="went down"):
        replay(spark_session, share, out, incremental=True)
    assert not (out / replay_state.STATE_FILE_NAME).exists()
    assert list((out / "records").glob("load=*"))  # the crashed run's rows are on disk

    replay(spark_session, share, out, incremental=True)
    assert_as_full_replay(spark_session, share, out, full_out)
    loads = state_of(out)["loads"]
    replay(spark_session, share, out, incremental=True)  # nothing new: no load added or replaced
    assert state_of(out)["loads"] == loads


@pytest.mark.spark
@pytest.mark.slow
def test_segments_removed_by_retention_after_they_were_read_keep_their_rows(
    spark_session: Any, dirs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    share, out, full_out = dirs
    store = open_master(share, 1, "node-a")
    send(store, "a", 40)
    store.close()
    replay(spark_session, share, out, incremental=True)
    successor = open_master(share, 2, "node-b")
    send(successor, "b", 20)
    successor.close()

    whole_journal = tmp_path / "whole"  # the journal as written, for the full replay
    shutil.copytree(share, whole_journal)
    oldest = list_segments(share / "journal")[:2]  # retention goes oldest first
    for segment in oldest:
        segment.path.unlink()
    replay(spark_session, share, out, incremental=True)

    assert {s.name for s in oldest} <= {r["segment"] for r in records(spark_session, out)}
    assert_as_full_replay(spark_session, whole_journal, out, full_out)


@pytest.mark.spark
@pytest.mark.slow
def test_a_segment_a_later_fence_cuts_below_what_was_read_is_read_again_wholly(
    spark_session: Any, dirs: tuple[Path, Path, Path]
) -> None:
    share, out, full_out = dirs
    store = open_master(share, 1, "node-a")
    send(store, "a", 12)
    store.close()
    live = list_segments(share / "journal")[-1].path
    whole = live.read_bytes()
    replay(spark_session, share, out, incremental=True)  # reads every byte of it as ok

    cut = batch_offsets(live)[-3]
    live.write_bytes(whole[:cut])  # the next master sees the last batches' bytes not yet there
    successor = open_master(share, 2, "node-b")
    send(successor, "b", 5)
    successor.close()
    live.write_bytes(whole)  # ... which the replay had read, and now reads as fenced
    replay(spark_session, share, out, incremental=True)

    assert state_of(out)["segments"][live.name]["fence_limit"] == cut
    fenced = [r for r in records(spark_session, out) if r["status"] == "fenced"]
    assert fenced and {r["segment"] for r in fenced} == {live.name}
    assert_as_full_replay(spark_session, share, out, full_out)
