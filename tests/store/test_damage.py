"""Damage on disk gives the documented outcome: torn tails cut off, damaged batches quarantined."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from primacy.store import format as fmt
from primacy.store.errors import UnsupportedJournal
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from primacy.store.segments import DamageKind, list_segments, scan_segment
from tests.store.segment_edits import rewrite_format_version
from tests.store.test_tools import run as journal_cli_run


def write_batches(store: JournalStore, count: int) -> None:
    """One append at a time, so each record is its own batch."""
    for i in range(count):
        store.append_send("q", f"m{i}", f"payload {i}".encode() * 10).result(timeout=5)


def batch_offsets(path: Path) -> list[int]:
    data = path.read_bytes()
    offset = fmt.decode_segment_header(data).header_len
    offsets = []
    while offset < len(data):
        status, header = fmt.check_batch(data, offset)
        assert status is fmt.BatchStatus.OK and header is not None
        offsets.append(offset)
        offset += header.batch_len
    return offsets


def flip_bit(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def pending_ids(journal: Path) -> set[str]:
    state = recover(journal).state
    return {m for queue in state.pending.values() for m in queue}


def test_a_truncated_tail_is_cut_off_and_reported(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    journal = tmp_path / "share" / "journal"
    store = open_store()
    write_batches(store, 5)
    store.close()
    segment = list_segments(journal)[-1].path
    last = batch_offsets(segment)[-1]
    with open(segment, "r+b") as handle:
        handle.truncate(last + 30)

    result = recover(journal)
    assert [(d.kind, d.offset) for d in result.report.torn_tails] == [(DamageKind.TORN_TAIL, last)]
    assert result.report.damaged == ()
    assert pending_ids(journal) == {"m0", "m1", "m2", "m3"}

    successor = open_store(epoch=2)
    assert successor.stats().torn_tails_at_open == 1
    successor.append_send("q", "m5", b"after").result(timeout=5)
    successor.close()
    after = recover(journal)
    assert after.report.torn_tails == () and after.report.fenced_records == 0
    assert pending_ids(journal) == {"m0", "m1", "m2", "m3", "m5"}


def test_a_flipped_bit_mid_segment_is_quarantined_and_later_records_survive(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    journal = tmp_path / "share" / "journal"
    store = open_store()
    write_batches(store, 6)
    store.close()
    segment = list_segments(journal)[-1].path
    offsets = batch_offsets(segment)
    flip_bit(segment, offsets[3] + 100)  # in m2's payload: offsets[0] is the fence

    result = recover(journal)
    assert [(d.kind, d.offset) for d in result.report.damaged] == [
        (DamageKind.DAMAGED_BATCH, offsets[3])
    ]
    assert result.report.torn_tails == ()
    assert pending_ids(journal) == {"m0", "m1", "m3", "m4", "m5"}

    successor = open_store(epoch=2)
    assert successor.stats().damaged_batches_at_open == 1
    quarantined = list((journal / "quarantine").iterdir())
    assert [p.name for p in quarantined] == [f"{segment.name}.{offsets[3]}.damaged_batch"]
    assert quarantined[0].stat().st_size == offsets[4] - offsets[3]


def test_a_flipped_bit_in_a_batch_length_resyncs_on_the_next_batch(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    journal = tmp_path / "share" / "journal"
    store = open_store()
    write_batches(store, 6)
    store.close()
    segment = list_segments(journal)[-1].path
    offsets = batch_offsets(segment)
    flip_bit(segment, offsets[2] + 9)  # the batch_len field of m1's batch

    result = recover(journal)
    assert [(d.offset, d.length) for d in result.report.damaged] == [
        (offsets[2], offsets[3] - offsets[2])
    ]
    assert pending_ids(journal) == {"m0", "m2", "m3", "m4", "m5"}


def test_damage_at_the_end_of_a_sealed_segment_is_damage_not_a_torn_tail(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    journal = tmp_path / "share" / "journal"
    store = open_store(segment_max_bytes=4096)
    write_batches(store, 40)
    store.close()
    segments = list_segments(journal)
    assert len(segments) >= 2
    sealed = segments[0].path
    last = batch_offsets(sealed)[-1]
    flip_bit(sealed, last + 60)

    result = recover(journal)
    assert [d.kind for d in result.report.damaged] == [DamageKind.DAMAGED_BATCH]
    assert result.report.torn_tails == ()
    assert len(pending_ids(journal)) == 39


def test_a_damaged_segment_header_is_reported_and_the_store_still_opens(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    journal = tmp_path / "share" / "journal"
    store = open_store(segment_max_bytes=4096)
    write_batches(store, 40)
    store.close()
    segments = list_segments(journal)
    flip_bit(segments[1].path, 20)

    result = recover(journal)
    assert [d.kind for d in result.report.damaged] == [DamageKind.BAD_SEGMENT_HEADER]
    successor = open_store(epoch=2)
    assert successor.append_send("q", "new", b"x").result(timeout=5) > 0


def test_a_segment_of_an_unknown_format_version_is_refused_not_skipped(
    open_store: Callable[..., JournalStore], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "share" / "journal"
    store = open_store(segment_max_bytes=4096)
    write_batches(store, 40)
    store.close()
    newer = list_segments(journal)[1]
    rewrite_format_version(newer.path, fmt.FORMAT_VERSION + 1)

    # Skipping it would drop acknowledged messages: recovery and the store refuse instead.
    with pytest.raises(UnsupportedJournal, match=f"PRIMACY-1411 .*{newer.name}"):
        recover(journal)
    with pytest.raises(UnsupportedJournal):
        open_store(epoch=2)
    assert not [s for s in list_segments(journal) if s.epoch == 2]  # nothing written
    scan = scan_segment(newer, newer.path.read_bytes())
    assert [d.kind for d in scan.damage] == [DamageKind.UNSUPPORTED_VERSION]

    capsys.readouterr()
    assert journal_cli_run(["journal", "verify", str(tmp_path / "share")]) == 2
    assert "PRIMACY-1411" in capsys.readouterr().err
