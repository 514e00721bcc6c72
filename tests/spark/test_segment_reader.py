"""The data source's reader function without Spark: every damage case, fences, filters, schema."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from primacy.spark.journal_plan import ALL_TIME, OptionError, TimeWindow, parse_time, plan_segments
from primacy.spark.segment_reader import RECORDS_SCHEMA, read_segment_batches
from primacy.store import format as fmt
from primacy.store import payloads
from primacy.store.config import StoreConfig
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from primacy.store.segments import list_segments
from tests.spark.journal_scenario import write_failover_journal
from tests.store.segment_edits import rewrite_format_version

OpenStore = Callable[..., JournalStore]


@pytest.fixture
def share(tmp_path: Path) -> Path:
    return tmp_path / "share"


@pytest.fixture
def open_store(share: Path) -> Iterator[OpenStore]:
    opened: list[JournalStore] = []

    def _open(epoch: int = 1, node: str = "node-a", **settings: object) -> JournalStore:
        config = StoreConfig(share=share, node_id=node, **settings)  # type: ignore[arg-type]
        store = JournalStore.open(config, epoch=epoch, fencing_check=lambda: None)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


def replay(share: Path, window: TimeWindow = ALL_TIME) -> pa.Table:
    batches = [b for plan in plan_segments(share) for b in read_segment_batches(plan, window)]
    return pa.Table.from_batches(batches, schema=RECORDS_SCHEMA)


def by_status(table: pa.Table) -> dict[str, int]:
    counts = table.group_by("status").aggregate([("status", "count")]).to_pylist()
    return {row["status"]: row["status_count"] for row in counts}


def message_ids(table: pa.Table, status: str = "ok") -> list[str]:
    rows = table.filter(pc.and_(pc.equal(table["status"], status), pc.equal(table["type"], "SEND")))
    ids: list[str] = rows["message_id"].to_pylist()
    return ids


def write_one_per_batch(store: JournalStore, prefix: str, count: int) -> None:
    for i in range(count):
        store.append_send("q", f"{prefix}{i}", f"payload {i}".encode() * 8).result(timeout=5)


def batch_offsets(path: Path) -> list[int]:
    data = path.read_bytes()
    offset, offsets = fmt.decode_segment_header(data).header_len, []
    while offset < len(data):
        status, header = fmt.check_batch(data, offset)
        assert status is fmt.BatchStatus.OK and header is not None
        offsets.append(offset)
        offset += header.batch_len
    return offsets


def edit(path: Path, change: Callable[[bytearray], None]) -> None:
    data = bytearray(path.read_bytes())
    change(data)
    path.write_bytes(bytes(data))


def damage_rows(table: pa.Table) -> list[tuple[str, str, int]]:
    rows = table.filter(pc.is_null(table["sequence"])).to_pylist()
    return [(r["status"], r["segment"], r["batch_offset"]) for r in rows]


# ---------------------------------------------------------------- clean journals


def test_a_clean_journal_gives_one_ok_row_per_record_with_decoded_fields(
    open_store: OpenStore, share: Path
) -> None:
    store = open_store()
    store.append_send("orders", "m1", b"hello", {"k": "v"}).result(timeout=5)
    store.append_ack("orders", "m1").result(timeout=5)
    store.append_control({"event": "role", "to": "MASTER"}).result(timeout=5)
    store.close()

    table = replay(share)
    assert table.schema == RECORDS_SCHEMA
    assert table["type"].to_pylist() == ["FENCE", "SEND", "ACK", "CONTROL"]
    assert table["sequence"].to_pylist() == [1, 2, 3, 4]
    assert set(table["status"].to_pylist()) == {"ok"}
    assert set(table["node"].to_pylist()) == {"node-a"}
    send = table.slice(1, 1).to_pylist()[0]
    assert (send["destination"], send["message_id"], send["payload"]) == ("orders", "m1", b"hello")
    assert payloads.decode_headers(send["headers"]) == {"k": "v"}
    assert payloads.decode_control(table.slice(3, 1).to_pylist()[0]["payload"])["to"] == "MASTER"


def test_the_failover_journal_gives_exactly_what_recovery_applies_fences_and_damages(
    tmp_path: Path,
) -> None:
    written = write_failover_journal(tmp_path / "share")
    report = recover(tmp_path / "share" / "journal", use_checkpoint=False, log=False).report

    table = replay(tmp_path / "share")
    assert by_status(table) == {
        "ok": report.records_applied,
        "fenced": report.fenced_records,
        "damaged_batch": len(report.damaged),
    }
    assert sorted(message_ids(table, "fenced")) == written.fenced_ids
    sends = message_ids(table)
    assert len(sends) == len(written.sends)
    assert "doomed" not in sends and sorted(set(sends)) == sorted({m for _, m in written.sends})


# ---------------------------------------------------------------- every damage case


def test_a_file_ending_inside_the_last_batch_of_an_epoch_is_a_torn_tail(
    open_store: OpenStore, share: Path
) -> None:
    store = open_store()
    write_one_per_batch(store, "m", 4)
    store.close()
    segment = list_segments(share / "journal")[-1].path
    last = batch_offsets(segment)[-1]
    with open(segment, "r+b") as handle:
        handle.truncate(last + 30)

    table = replay(share)
    assert damage_rows(table) == [("torn_tail", segment.name, last)]
    assert message_ids(table) == ["m0", "m1", "m2"]


@pytest.mark.parametrize(
    "tail",
    [b"\0" * 100, bytes(range(1, 101))],  # not only zeros: what a crash may leave on some disks
    ids=["zeros", "garbage"],
)
def test_bytes_after_the_last_batch_of_an_epoch_are_a_torn_tail(
    open_store: OpenStore, share: Path, tail: bytes
) -> None:
    store = open_store()
    write_one_per_batch(store, "m", 3)
    store.close()
    segment = list_segments(share / "journal")[-1].path
    end = segment.stat().st_size
    with open(segment, "ab") as handle:
        handle.write(tail)

    table = replay(share)
    assert damage_rows(table) == [("torn_tail", segment.name, end)]
    assert table.filter(pc.is_null(table["sequence"]))["byte_length"].to_pylist() == [100]
    assert message_ids(table) == ["m0", "m1", "m2"]


def test_a_damaged_batch_with_a_valid_one_after_it_keeps_the_later_records(
    open_store: OpenStore, share: Path
) -> None:
    store = open_store()
    write_one_per_batch(store, "m", 5)
    store.close()
    segment = list_segments(share / "journal")[-1].path
    offsets = batch_offsets(segment)
    edit(segment, lambda data: data.__setitem__(offsets[2] + 100, data[offsets[2] + 100] ^ 1))

    table = replay(share)
    assert damage_rows(table) == [("damaged_batch", segment.name, offsets[2])]
    assert table.filter(pc.is_null(table["sequence"]))["detail"].to_pylist() == ["crc mismatch"]
    assert message_ids(table) == ["m0", "m2", "m3", "m4"]  # offsets[0] is the fence


def test_damage_at_the_end_of_a_sealed_segment_is_a_damaged_batch_not_a_torn_tail(
    open_store: OpenStore, share: Path
) -> None:
    store = open_store(segment_max_bytes=4096)
    write_one_per_batch(store, "m", 40)
    store.close()
    first = list_segments(share / "journal")[0].path
    assert len(list_segments(share / "journal")) > 1
    with open(first, "r+b") as handle:
        handle.truncate(batch_offsets(first)[-1] + 20)

    table = replay(share)
    assert [row[0] for row in damage_rows(table)] == ["damaged_batch"]
    assert len(message_ids(table)) == 39


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda data: data.__setitem__(0, ord("X")), id="bad magic"),
        pytest.param(lambda data: data.__setitem__(30, data[30] ^ 1), id="bad crc"),
        pytest.param(lambda data: data.__setitem__(8, data[8] ^ 0x10), id="version field damaged"),
    ],
)
def test_a_damaged_segment_header_skips_the_segment_and_says_so(
    open_store: OpenStore, share: Path, change: Callable[[bytearray], None]
) -> None:
    store = open_store(segment_max_bytes=4096)
    write_one_per_batch(store, "m", 40)
    store.close()
    segments = list_segments(share / "journal")
    edit(segments[0].path, change)

    table = replay(share)
    assert damage_rows(table) == [("bad_segment_header", segments[0].name, 0)]
    assert set(table["segment"].to_pylist()) == {s.name for s in segments}
    assert "m39" in message_ids(table) and "m0" not in message_ids(table)


def test_an_intact_segment_of_an_unknown_format_version_is_reported_unreadable(
    open_store: OpenStore, share: Path
) -> None:
    store = open_store(segment_max_bytes=4096)
    write_one_per_batch(store, "m", 40)
    store.close()
    segments = list_segments(share / "journal")
    rewrite_format_version(segments[0].path, fmt.FORMAT_VERSION + 1)

    table = replay(share)  # the replay reports it; recovery refuses it (tests/store)
    assert damage_rows(table) == [("unsupported_version", segments[0].name, 0)]
    assert "m39" in message_ids(table) and "m0" not in message_ids(table)


def test_an_epochs_last_segment_cut_inside_its_header_is_a_torn_tail(
    open_store: OpenStore, share: Path
) -> None:
    store = open_store()
    write_one_per_batch(store, "m", 2)
    store.close()
    segment = list_segments(share / "journal")[-1].path
    with open(segment, "r+b") as handle:
        handle.truncate(20)

    assert damage_rows(replay(share)) == [("torn_tail", segment.name, 0)]


def test_a_damaged_batch_length_resyncs_on_the_next_batch(
    open_store: OpenStore, share: Path
) -> None:
    store = open_store()
    write_one_per_batch(store, "m", 5)
    store.close()
    segment = list_segments(share / "journal")[-1].path
    offsets = batch_offsets(segment)
    edit(segment, lambda data: data.__setitem__(offsets[2] + 9, data[offsets[2] + 9] ^ 0x10))

    table = replay(share)
    assert damage_rows(table) == [("damaged_batch", segment.name, offsets[2])]
    assert table.filter(pc.is_null(table["sequence"]))["byte_length"].to_pylist() == [
        offsets[3] - offsets[2]
    ]
    assert message_ids(table) == ["m0", "m2", "m3", "m4"]


def test_an_epochs_last_segment_whose_header_lost_its_magic_is_a_torn_tail(
    open_store: OpenStore, share: Path
) -> None:
    store = open_store(segment_max_bytes=4096)
    write_one_per_batch(store, "m", 40)
    store.close()
    segments = list_segments(share / "journal")
    assert len(segments) > 1
    last = segments[-1]
    # A crash after the file was created, before its header reached the disk: zeros.
    edit(last.path, lambda data: data.__setitem__(slice(0, 48), bytes(48)))

    table = replay(share)
    assert damage_rows(table) == [("torn_tail", last.name, 0)]
    in_last = table.filter(pc.equal(table["segment"], last.name))
    assert in_last["byte_length"].to_pylist() == [last.path.stat().st_size]
    assert "m0" in message_ids(table) and "m39" not in message_ids(table)


def test_a_torn_tail_is_fenced_once_the_next_master_took_over(
    open_store: OpenStore, share: Path
) -> None:
    crashed = open_store(epoch=1, node="node-a")
    write_one_per_batch(crashed, "m", 3)
    crashed.close()
    segment = list_segments(share / "journal")[-1].path
    last = batch_offsets(segment)[-1]
    with open(segment, "r+b") as handle:
        handle.truncate(last + 30)
    successor = open_store(epoch=2, node="node-b")  # its fence ends before the torn bytes
    successor.append_send("q", "b0", b"new master").result(timeout=5)
    successor.close()

    table = replay(share)
    report = recover(share / "journal", use_checkpoint=False, log=False).report
    assert [(f.segment, f.offset, f.length, f.records) for f in report.fenced] == [
        (segment.name, last, 30, 0)
    ]
    assert report.torn_tails == ()
    assert damage_rows(table) == [("fenced", segment.name, last)]
    assert table.filter(pc.is_null(table["sequence"]))["byte_length"].to_pylist() == [30]
    assert message_ids(table) == ["m0", "m1", "b0"]


# ---------------------------------------------------------------- fences


def test_batches_past_a_fence_are_decoded_as_fenced_and_whole_unlisted_segments_too(
    open_store: OpenStore, share: Path
) -> None:
    stale = open_store(epoch=1, node="node-a")
    write_one_per_batch(stale, "early", 3)
    successor = open_store(epoch=2, node="node-b")  # fences epoch 1 at its current length
    write_one_per_batch(stale, "late", 2)  # the stale master has no real fencing check here
    successor.append_send("q", "b0", b"new master").result(timeout=5)
    stale.close()
    successor.close()

    table = replay(share)
    assert message_ids(table, "fenced") == ["late0", "late1"]
    assert message_ids(table) == ["early0", "early1", "early2", "b0"]
    fenced = table.filter(pc.equal(table["status"], "fenced"))
    assert set(fenced["node"].to_pylist()) == {"node-a"}


def test_a_segment_created_after_the_fence_is_entirely_fenced(
    open_store: OpenStore, share: Path
) -> None:
    stale = open_store(epoch=1, node="node-a", segment_max_bytes=4096)
    write_one_per_batch(stale, "early", 3)
    open_store(epoch=2, node="node-b").close()
    write_one_per_batch(stale, "late", 40)  # rotates into segments no fence lists
    stale.close()

    plans = plan_segments(share)
    assert [p.fence_limit for p in plans if p.epoch == 1][1:] == [0] * (
        len([p for p in plans if p.epoch == 1]) - 1
    )
    table = replay(share)
    assert message_ids(table, "fenced") == [f"late{i}" for i in range(40)]
    assert message_ids(table) == ["early0", "early1", "early2"]


@pytest.mark.parametrize("checkpoint", ["kept", "never written"])
def test_a_damaged_fence_batch_is_reported_and_the_replay_applies_the_fence_as_recovery_does(
    open_store: OpenStore, share: Path, checkpoint: str
) -> None:
    stale = open_store(epoch=1, node="node-a")
    write_one_per_batch(stale, "early", 2)
    successor = open_store(epoch=2, node="node-b")  # fences epoch 1, then checkpoints
    write_one_per_batch(stale, "late", 2)  # past the fence (no real fencing check here)
    write_one_per_batch(successor, "b", 2)
    stale.close()
    successor.close()
    journal = share / "journal"
    if checkpoint == "never written":  # node-b died between its fence and its checkpoint
        for path in (journal / "checkpoints").iterdir():
            path.unlink()
    [first_of_b] = [s.path for s in list_segments(journal) if s.epoch == 2]
    fence_at = batch_offsets(first_of_b)[0]
    heap = fence_at + fmt.BATCH_HEADER_LEN + fmt.RECORD_HEADER_LEN + 4
    edit(first_of_b, lambda data: data.__setitem__(heap, data[heap] ^ 0x40))

    table = replay(share)
    assert damage_rows(table) == [("damaged_batch", first_of_b.name, fence_at)]
    assert message_ids(table, "damaged_batch") == []  # damaged bytes are never decoded
    recovered = recover(journal, log=False)
    pending = {m for queue in recovered.state.pending.values() for m in queue}
    # The replay's ok and fenced records are exactly what recovery applies and ignores.
    assert set(message_ids(table)) == pending
    assert len(message_ids(table, "fenced")) == recovered.report.fenced_records
    if checkpoint == "kept":  # the checkpoint's copy of the fence still holds
        assert message_ids(table) == ["early0", "early1", "b0", "b1"]
        assert message_ids(table, "fenced") == ["late0", "late1"]
    else:  # the documented gap: with both copies gone the stale writes count
        assert message_ids(table) == ["early0", "early1", "late0", "late1", "b0", "b1"]
        assert message_ids(table, "fenced") == []


# ---------------------------------------------------------------- options


def test_the_time_window_keeps_since_inclusive_until_exclusive(
    open_store: OpenStore, share: Path
) -> None:
    store = open_store()
    write_one_per_batch(store, "m", 6)
    store.close()
    everything = replay(share)
    sends = everything.filter(pc.equal(everything["type"], "SEND"))
    stamps = [int(t.timestamp() * 1e6) * 1000 for t in sends["timestamp"].to_pylist()]

    window = TimeWindow(since_unix_ns=stamps[2], until_unix_ns=stamps[4])
    assert message_ids(replay(share, window)) == ["m2", "m3"]


def test_epochs_can_be_chosen_and_fences_still_apply(open_store: OpenStore, share: Path) -> None:
    first = open_store(epoch=1)
    write_one_per_batch(first, "a", 2)
    first.close()
    second = open_store(epoch=2, node="node-b")
    write_one_per_batch(second, "b", 2)
    second.close()

    assert [p.epoch for p in plan_segments(share, frozenset({2}))] == [2]
    assert [p.fence_limit is not None for p in plan_segments(share, frozenset({1}))] == [True]


def test_times_are_read_as_iso_8601_in_utc_or_unix_seconds() -> None:
    assert parse_time("1970-01-01T00:00:01Z") == 1_000_000_000
    assert parse_time("1970-01-01T01:00:01+01:00") == 1_000_000_000
    assert parse_time("1970-01-01 00:00:01.5") == 1_500_000_000
    assert parse_time("2.25") == 2_250_000_000
    with pytest.raises(OptionError, match="ISO 8601"):
        parse_time("yesterday")


def test_the_arrow_schema_is_exactly_what_spark_expects_from_the_data_source() -> None:
    pytest.importorskip("pyspark", reason="the [spark] extra is not installed")
    from pyspark.sql.pandas.types import to_arrow_schema

    from primacy.spark.journal_source import RECORDS_SPARK_SCHEMA

    assert to_arrow_schema(RECORDS_SPARK_SCHEMA, timezone="UTC").equals(RECORDS_SCHEMA)
