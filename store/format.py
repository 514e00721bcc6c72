"""The journal's on-disk format: segment headers, batches, records; the one encoder and decoder.

``docs/journal-format.md`` is the contract, byte by byte; this module implements
it and everything that reads the journal (recovery, ``primacy journal``, the
Spark replay) imports it rather than parsing bytes itself.

A batch is laid out for columnar readers: a fixed-width record-header array,
then four heaps (destinations, message ids, headers, payloads), each holding
that field of every record back to back. The layouts are declared once, below,
as (field, ``struct`` code) pairs: the ``struct`` formats here and the numpy
dtypes of the column decoder (``store/columns.py``) are both derived from them.
``records_fault`` is the one check of a batch's records (recovery, ``primacy
journal`` and the replay all take its verdict).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from primacy.store.errors import FormatError as FormatError
from primacy.store.errors import UnsupportedFormatVersion as UnsupportedFormatVersion
from primacy.store.payloads import decode_headers, utf8_text

# Version 2 added the durable subscription records (SUBSCRIBE, UNSUBSCRIBE); a version 1
# segment holds none of them and reads as it always did. A release that knows only version 1
# refuses a version 2 segment whole (UnsupportedFormatVersion), never one record of it.
FORMAT_VERSION = 2
READABLE_FORMAT_VERSIONS = (1, 2)
SEGMENT_MAGIC = b"PRIMACYJ"
BATCH_MAGIC = b"PJB1"
ALIGNMENT = 8
MAX_BATCH_BYTES = 2**31 - 1  # heap offsets are int32 in Arrow's binary type

# The layouts (docs/journal-format.md), each field with its ``struct`` code, little-endian.
# Every reader derives its view from these: ``struct`` here, numpy in ``store/columns.py``.
Layout = tuple[tuple[str, str], ...]

# The node id follows the fixed part, zero padded to 8.
SEGMENT_HEADER_FIELDS: Layout = (
    ("magic", "8s"), ("format_version", "H"), ("header_len", "H"), ("node_id_len", "H"),
    ("reserved", "H"), ("epoch", "Q"), ("first_sequence", "Q"), ("created_unix_ns", "q"),
    ("reserved2", "I"), ("header_crc32c", "I"),
)  # fmt: skip
BATCH_HEADER_FIELDS: Layout = (
    ("magic", "4s"), ("crc32c", "I"), ("batch_len", "I"), ("record_count", "I"),
    ("epoch", "Q"), ("first_sequence", "Q"), ("commit_unix_ns", "q"), ("heap_len", "I"),
    ("record_header_len", "H"), ("flags", "H"),
)  # fmt: skip
RECORD_HEADER_FIELDS: Layout = (
    ("sequence", "Q"), ("epoch", "Q"), ("timestamp_unix_ns", "q"), ("record_type", "B"),
    ("flags", "B"), ("destination_len", "H"), ("message_id_len", "H"), ("reserved", "H"),
    ("headers_len", "I"), ("payload_len", "I"),
)  # fmt: skip
# The record header fields holding each heap's lengths, in the order the heaps are stored.
HEAP_LENGTH_FIELDS = ("destination_len", "message_id_len", "headers_len", "payload_len")


def layout_struct(fields: Layout) -> struct.Struct:
    return struct.Struct("<" + "".join(code for _, code in fields))


def field_offset(fields: Layout, name: str) -> int:
    """Where ``name`` starts in a layout: the size of the fields before it."""
    names = [field for field, _ in fields]
    return layout_struct(fields[: names.index(name)]).size


_SEGMENT_HEADER = layout_struct(SEGMENT_HEADER_FIELDS)
SEGMENT_HEADER_FIXED_LEN = _SEGMENT_HEADER.size  # 48
_SEGMENT_CRC_OFFSET = field_offset(SEGMENT_HEADER_FIELDS, "header_crc32c")  # 44

_BATCH_HEADER = layout_struct(BATCH_HEADER_FIELDS)
BATCH_HEADER_LEN = _BATCH_HEADER.size  # 48
BATCH_CRC_START = field_offset(BATCH_HEADER_FIELDS, "batch_len")  # 8: what the CRC covers

_RECORD_HEADER = layout_struct(RECORD_HEADER_FIELDS)
RECORD_HEADER_LEN = _RECORD_HEADER.size  # 40
_HEAP_LENGTHS_AT = tuple(
    [field for field, _ in RECORD_HEADER_FIELDS].index(name) for name in HEAP_LENGTH_FIELDS
)  # (5, 6, 8, 9): their places in an unpacked record header


# Epochs and sequences are u64 on disk, but no node reaches 2^63 (both count up from 1),
# checkpoints hold numbers up to it only, and the replay's columns are signed.
MAX_NUMBER = 2**63 - 1
MAX_DESTINATION_BYTES = 0xFFFF
MAX_MESSAGE_ID_BYTES = 0xFFFF


class RecordType(enum.IntEnum):
    """What a record says; the number is what is stored."""

    SEND = 1
    ACK = 2
    CONTROL = 3
    FENCE = 4
    DELIVER = 5  # a message was handed to a consumer (for the replay; recovery ignores it)
    # A durable topic subscription began or ended (format version 2): the destination is the
    # topic, the message id field the subscription's queue name (``broker/topics.py``).
    SUBSCRIBE = 6
    UNSUBSCRIBE = 7


@dataclass(frozen=True)
class SegmentHeader:
    """The header at offset 0 of every segment file."""

    epoch: int
    first_sequence: int
    node_id: str
    created_unix_ns: int
    format_version: int = FORMAT_VERSION
    header_len: int = 0


@dataclass(frozen=True)
class BatchHeader:
    """The fixed 48-byte header in front of every batch."""

    crc32c: int
    batch_len: int
    record_count: int
    epoch: int
    first_sequence: int
    commit_unix_ns: int
    heap_len: int

    @property
    def last_sequence(self) -> int:
        return self.first_sequence + self.record_count - 1


@dataclass(frozen=True)
class EncodedRecord:
    """One record ready to be placed in a batch (sequence and epoch come from the batch)."""

    record_type: RecordType
    timestamp_unix_ns: int
    destination: bytes = b""
    message_id: bytes = b""
    headers: bytes = b""
    payload: bytes = b""

    @property
    def encoded_len(self) -> int:
        """Bytes this record takes in a batch: header slot plus its heap bytes."""
        return (
            RECORD_HEADER_LEN
            + len(self.destination)
            + len(self.message_id)
            + len(self.headers)
            + len(self.payload)
        )


@dataclass(frozen=True)
class Record:
    """One decoded record, for tools and recovery (columnar readers use ``decode_batch``)."""

    sequence: int
    epoch: int
    timestamp_unix_ns: int
    record_type: RecordType
    destination: str
    message_id: str
    headers: dict[str, str]
    payload: bytes


class BatchStatus(enum.Enum):
    """The outcome of checking the bytes at one offset."""

    OK = "ok"
    INCOMPLETE = "incomplete"  # the file ends before the batch does
    BAD_MAGIC = "bad magic"
    BAD_HEADER = "inconsistent header"
    BAD_CRC = "crc mismatch"


# ---------------------------------------------------------------- encoding


def encode_segment_header(header: SegmentHeader) -> bytes:
    node = header.node_id.encode()
    if len(node) > 0xFFFF:
        raise FormatError("the node id is longer than 65535 bytes")
    padded = node + b"\0" * (-len(node) % ALIGNMENT)
    header_len = SEGMENT_HEADER_FIXED_LEN + len(padded)
    fixed = _SEGMENT_HEADER.pack(
        SEGMENT_MAGIC, FORMAT_VERSION, header_len, len(node), 0,
        header.epoch, header.first_sequence, header.created_unix_ns, 0, 0,
    )  # fmt: skip
    crc = crc32c.crc32c(padded, crc32c.crc32c(fixed[:_SEGMENT_CRC_OFFSET]))
    return fixed[:_SEGMENT_CRC_OFFSET] + struct.pack("<I", crc) + padded


def encode_batch(
    epoch: int, first_sequence: int, commit_unix_ns: int, records: list[EncodedRecord]
) -> bytes:
    """One batch: header, record-header array, four heaps, zero padding to 8 bytes."""
    if not records:
        raise FormatError("a batch holds at least one record")
    slots = [
        _RECORD_HEADER.pack(
            first_sequence + index,
            epoch,
            r.timestamp_unix_ns,
            int(r.record_type),
            0,
            len(r.destination),
            len(r.message_id),
            0,
            len(r.headers),
            len(r.payload),
        )
        for index, r in enumerate(records)
    ]
    heaps = [r.destination for r in records]
    heaps += [r.message_id for r in records]
    heaps += [r.headers for r in records]
    heaps += [r.payload for r in records]
    body = b"".join(slots + heaps)
    heap_len = len(body) - RECORD_HEADER_LEN * len(records)
    unpadded = BATCH_HEADER_LEN + len(body)
    batch_len = unpadded + (-unpadded % ALIGNMENT)
    if batch_len > MAX_BATCH_BYTES:
        raise FormatError(f"a batch of {batch_len} bytes exceeds the format's {MAX_BATCH_BYTES}")
    tail = _BATCH_HEADER.pack(
        BATCH_MAGIC, 0, batch_len, len(records), epoch, first_sequence, commit_unix_ns,
        heap_len, RECORD_HEADER_LEN, 0,
    )[BATCH_CRC_START:]  # fmt: skip
    padding = b"\0" * (batch_len - unpadded)
    crc = crc32c.crc32c(padding, crc32c.crc32c(body, crc32c.crc32c(tail)))
    return BATCH_MAGIC + struct.pack("<I", crc) + tail + body + padding


# ---------------------------------------------------------------- checking


def decode_segment_header(data: bytes | memoryview) -> SegmentHeader:
    """Parse and check a segment header; FormatError if it is short, foreign or damaged."""
    if len(data) < SEGMENT_HEADER_FIXED_LEN:
        raise FormatError("the segment header is incomplete")
    magic, version, header_len, node_len, _, epoch, first, created, _, crc = (
        _SEGMENT_HEADER.unpack_from(data, 0)
    )
    if magic != SEGMENT_MAGIC:
        raise FormatError("the file does not start with the journal segment magic")
    # Every version keeps this fixed part and its CRC rule, so an intact header of an
    # unknown version is told apart from damage: the first must be refused, not skipped.
    if header_len < SEGMENT_HEADER_FIXED_LEN + node_len or header_len > len(data):
        raise FormatError("the segment header is incomplete or its length is wrong")
    expected = crc32c.crc32c(
        bytes(data[SEGMENT_HEADER_FIXED_LEN:header_len]),
        crc32c.crc32c(bytes(data[:_SEGMENT_CRC_OFFSET])),
    )
    if crc != expected:
        raise FormatError("the segment header fails its CRC32C")
    if version not in READABLE_FORMAT_VERSIONS:
        raise UnsupportedFormatVersion(
            f"segment format version {version} is not supported (only "
            f"{', '.join(map(str, READABLE_FORMAT_VERSIONS))}); "
            "it was written by another primacy release"
        )
    node = bytes(data[SEGMENT_HEADER_FIXED_LEN : SEGMENT_HEADER_FIXED_LEN + node_len])
    return SegmentHeader(epoch, first, node.decode(errors="replace"), created, version, header_len)


def check_batch(data: bytes | memoryview, offset: int) -> tuple[BatchStatus, BatchHeader | None]:
    """Check the batch starting at ``offset``: magic, lengths, structure, CRC32C."""
    status, header = check_batch_header(data, offset, len(data) - offset)
    if status is not BatchStatus.OK or header is None:
        return status, header
    view = memoryview(data)[offset + BATCH_CRC_START : offset + header.batch_len]
    if crc32c.crc32c(view) != header.crc32c:
        return BatchStatus.BAD_CRC, header
    return BatchStatus.OK, header


def check_batch_header(
    data: bytes | memoryview, offset: int, available: int
) -> tuple[BatchStatus, BatchHeader | None]:
    """Everything ``check_batch`` checks but the CRC, from the header at ``offset`` alone;
    ``available`` is how many bytes the file holds from ``offset`` on. OK means: the CRC
    over ``[offset + BATCH_CRC_START, offset + batch_len)`` is all that is left to check."""
    if available < BATCH_HEADER_LEN or len(data) - offset < BATCH_HEADER_LEN:
        return BatchStatus.INCOMPLETE, None
    magic, crc, batch_len, count, epoch, first, commit, heap_len, slot_len, _ = (
        _BATCH_HEADER.unpack_from(data, offset)
    )
    if magic != BATCH_MAGIC:
        return BatchStatus.BAD_MAGIC, None
    header = BatchHeader(crc, batch_len, count, epoch, first, commit, heap_len)
    content = BATCH_HEADER_LEN + count * slot_len + heap_len
    if (
        count < 1
        or slot_len != RECORD_HEADER_LEN
        or batch_len % ALIGNMENT
        or not content <= batch_len < content + ALIGNMENT
    ):
        return BatchStatus.BAD_HEADER, header
    if batch_len > available:
        return BatchStatus.INCOMPLETE, header
    return BatchStatus.OK, header


# ---------------------------------------------------------------- decoding


def iter_records(batch: bytes | memoryview) -> Iterator[Record]:
    """Yield the records of one checked batch (``batch`` starts at its header).

    A batch whose CRC holds but whose records we never wrote (a record type we do
    not know, lengths that do not add up, text that is not UTF-8, sequences or
    epochs other than the batch's, or past ``MAX_NUMBER``) raises FormatError: the
    CRC proves the bytes are whole, not that they are ours.
    """
    for seq, epoch, ts, record_type, destination, message_id, headers, payload in _walk(batch):
        yield Record(
            sequence=seq,
            epoch=epoch,
            timestamp_unix_ns=ts,
            record_type=record_type,
            destination=destination,
            message_id=message_id,
            headers=decode_headers(headers) if headers else {},
            payload=bytes(payload),
        )


def record_keys(batch: bytes | memoryview) -> list[tuple[RecordType, int, str, str]]:
    """(type, sequence, destination, message id) of each record of one checked batch.

    All recovery needs, checked exactly as ``iter_records`` checks (FormatError), without
    building a Record or copying a payload: recovery's time is per record.
    """
    return [(rtype, seq, dest, mid) for seq, _, _, rtype, dest, mid, _, _ in _walk(batch)]


def records_fault(batch: bytes | memoryview) -> str | None:
    """Why the records of one checked batch are not ones we wrote, or None if they are.

    The one check of a batch's records (docs/journal-format.md): the one recovery makes
    (``record_keys``),
    ``iter_records`` and so ``primacy journal`` too, and the verdict the replay reports
    (``store/batch_runs.py`` passes only what this passes, and asks this of the rest).
    """
    try:
        for _ in _walk(batch):
            pass
    except FormatError as exc:
        return str(exc)
    return None


def _walk(
    batch: bytes | memoryview,
) -> Iterator[tuple[int, int, int, RecordType, str, str, memoryview, memoryview]]:
    """Each record's sequence, epoch, time, type, destination, id, headers and payload bytes."""
    view = memoryview(batch)
    header = batch_header_at(view)
    if header.epoch > MAX_NUMBER or header.last_sequence > MAX_NUMBER:
        raise FormatError(
            f"the batch's epoch {header.epoch} or last sequence {header.last_sequence} is past "
            "2^63 - 1, which no node reaches (nor can a checkpoint or the replay hold it)"
        )
    slots = [
        _RECORD_HEADER.unpack_from(view, BATCH_HEADER_LEN + i * RECORD_HEADER_LEN)
        for i in range(header.record_count)
    ]
    cursor = BATCH_HEADER_LEN + header.record_count * RECORD_HEADER_LEN
    heap_starts = []
    for field in _HEAP_LENGTHS_AT:  # destination, message id, headers, payload lengths
        heap_starts.append(cursor)
        cursor += sum(slot[field] for slot in slots)
    if cursor - BATCH_HEADER_LEN - header.record_count * RECORD_HEADER_LEN != header.heap_len:
        raise FormatError("the records' lengths do not add up to the batch's heap")
    dest_at, id_at, headers_at, payload_at = heap_starts
    for index, (seq, epoch, ts, rtype, _, dlen, mlen, _, hlen, plen) in enumerate(slots):
        if seq != header.first_sequence + index or epoch != header.epoch:
            raise FormatError(f"record {index} has sequence {seq} and epoch {epoch}")
        record_type = _RECORD_TYPES.get(rtype)
        if record_type is None:
            raise FormatError(f"record {seq} has unknown type {rtype}")
        yield (
            seq,
            epoch,
            ts,
            record_type,
            utf8_text(view[dest_at : dest_at + dlen], "destination"),
            utf8_text(view[id_at : id_at + mlen], "message id"),
            view[headers_at : headers_at + hlen],
            view[payload_at : payload_at + plen],
        )
        dest_at, id_at, headers_at, payload_at = (
            dest_at + dlen, id_at + mlen, headers_at + hlen, payload_at + plen,
        )  # fmt: skip


# By value: a dictionary lookup per record, where calling the enum costs as much again.
_RECORD_TYPES = {int(t): t for t in RecordType}


def batch_header_at(view: memoryview, offset: int = 0) -> BatchHeader:
    """The header of the (already checked) batch at ``offset``."""
    return _header_at(view, offset)


def _header_at(view: memoryview, offset: int) -> BatchHeader:
    _, crc, batch_len, count, epoch, first, commit, heap_len, _, _ = _BATCH_HEADER.unpack_from(
        view, offset
    )
    return BatchHeader(crc, batch_len, count, epoch, first, commit, heap_len)
