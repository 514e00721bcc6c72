"""The byte format: batches round-trip, columns match records, damage is detected."""

from __future__ import annotations

import pyarrow as pa

from primacy.store import format as fmt
from primacy.store import payloads
from primacy.store.columns import RECORD_DTYPE
from primacy.store.decoder import ARROW_COLUMNS, decode_batch


def sample_records() -> list[fmt.EncodedRecord]:
    return [
        fmt.EncodedRecord(
            fmt.RecordType.SEND,
            11,
            b"queue/a",
            b"m-1",
            payloads.encode_headers({"k": "v"}),
            b"hello",
        ),
        fmt.EncodedRecord(fmt.RecordType.ACK, 12, b"queue/a", b"m-1"),
        fmt.EncodedRecord(
            fmt.RecordType.CONTROL, 13, payload=payloads.encode_control({"role": "MASTER"})
        ),
        fmt.EncodedRecord(fmt.RecordType.SEND, 14, b"q/\xc3\xa9", b"m-2", b"", b"\x00\xff" * 7),
    ]


def test_batch_round_trips_through_the_record_iterator() -> None:
    batch = fmt.encode_batch(3, 100, 999, sample_records())
    status, header = fmt.check_batch(batch, 0)
    assert status is fmt.BatchStatus.OK and header is not None
    assert (header.epoch, header.first_sequence, header.last_sequence) == (3, 100, 103)
    assert len(batch) == header.batch_len and len(batch) % 8 == 0
    records = list(fmt.iter_records(batch))
    assert [r.sequence for r in records] == [100, 101, 102, 103]
    assert records[0].headers == {"k": "v"} and records[0].payload == b"hello"
    assert records[1].record_type is fmt.RecordType.ACK and records[1].message_id == "m-1"
    assert payloads.decode_control(records[2].payload) == {"role": "MASTER"}
    assert records[3].destination == "q/é" and records[3].payload == b"\x00\xff" * 7


def test_recovery_reads_the_same_keys_the_record_iterator_gives() -> None:
    batch = fmt.encode_batch(3, 100, 999, sample_records())
    assert fmt.record_keys(batch) == [
        (r.record_type, r.sequence, r.destination, r.message_id) for r in fmt.iter_records(batch)
    ]


def test_columnar_decoding_matches_the_record_iterator() -> None:
    batch = fmt.encode_batch(3, 100, 999, sample_records())
    columns = decode_batch(batch)
    records = list(fmt.iter_records(batch))
    assert columns.sequence.tolist() == [r.sequence for r in records]
    assert columns.record_type.tolist() == [int(r.record_type) for r in records]
    assert [columns.payload.value(i) for i in range(4)] == [r.payload for r in records]
    arrow = columns.to_arrow()
    assert arrow.schema.names == list(ARROW_COLUMNS)
    assert arrow.column("destination").to_pylist() == [r.destination for r in records]
    assert arrow.column("message_id").to_pylist() == [r.message_id for r in records]
    assert arrow.column("payload").to_pylist() == [r.payload for r in records]
    assert arrow.column("timestamp").cast(pa.int64()).to_pylist() == [11, 12, 13, 14]


def test_fence_payload_round_trips() -> None:
    entries = [payloads.FenceEntry(1, 1, 4096), payloads.FenceEntry(2, 77, 0)]
    assert payloads.decode_fence(payloads.encode_fence(entries)) == entries


def test_every_flipped_bit_in_a_batch_is_detected() -> None:
    batch = fmt.encode_batch(1, 1, 5, sample_records()[:2])
    for bit in range(0, len(batch) * 8, 7):
        damaged = bytearray(batch)
        damaged[bit // 8] ^= 1 << (bit % 8)
        assert fmt.check_batch(bytes(damaged), 0)[0] is not fmt.BatchStatus.OK, bit


def test_a_cut_batch_is_incomplete() -> None:
    batch = fmt.encode_batch(1, 1, 5, sample_records())
    assert fmt.check_batch(batch[:-9], 0)[0] is fmt.BatchStatus.INCOMPLETE
    assert fmt.check_batch(batch[:20], 0)[0] is fmt.BatchStatus.INCOMPLETE


def test_segment_header_round_trips_and_detects_damage() -> None:
    raw = fmt.encode_segment_header(fmt.SegmentHeader(7, 42, "node-é", 123))
    header = fmt.decode_segment_header(raw)
    assert (header.epoch, header.first_sequence, header.node_id, header.header_len) == (
        7,
        42,
        "node-é",
        len(raw),
    )
    damaged = bytearray(raw)
    damaged[20] ^= 4
    try:
        fmt.decode_segment_header(bytes(damaged))
    except fmt.FormatError as exc:
        assert "CRC32C" in str(exc)
    else:
        raise AssertionError("a damaged segment header was accepted")


def test_the_column_decoders_record_layout_is_the_formats() -> None:
    assert RECORD_DTYPE.itemsize == fmt.RECORD_HEADER_LEN
