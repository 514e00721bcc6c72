"""Segment files on the share: names, listing, and scanning one segment with damage classified.

Scanning is read-only; it says where the valid batches are, where a torn tail
starts, which byte ranges are damaged and which are fenced. Recovery and the
journal tools decide what to do with that.
"""

from __future__ import annotations

import enum
import os
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

import crc32c

from primacy.share.safe_io import open_regular, regular_files_in
from primacy.store import format as fmt

SEGMENT_SUFFIX = ".seg"
# Epochs and sequences are u64 in every header. A name carries them zero-padded to 10 and
# 20 ASCII digits; an epoch past 10 digits widens its name (segments sort by number, not
# by name). A name that is not exactly what ``segment_name`` writes is not a segment.
_SEGMENT_NAME = re.compile(r"([0-9]{10,20})-([0-9]{20})\.seg", re.ASCII)
MAX_U64 = 2**64 - 1


@dataclass(frozen=True, order=True)
class SegmentRef:
    """One segment file, ordered by (epoch, first sequence) as recovery reads them."""

    epoch: int
    first_sequence: int
    path: Path = field(compare=False)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def key(self) -> tuple[int, int]:
        """How a fence names this segment."""
        return (self.epoch, self.first_sequence)


def segment_name(epoch: int, first_sequence: int) -> str:
    return f"{epoch:010d}-{first_sequence:020d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> tuple[int, int] | None:
    """(epoch, first sequence) of a segment file's name, or None for any other name."""
    match = _SEGMENT_NAME.fullmatch(name)
    if match is None:
        return None
    epoch, first_sequence = int(match[1]), int(match[2])
    if max(epoch, first_sequence) > MAX_U64 or segment_name(epoch, first_sequence) != name:
        return None
    return epoch, first_sequence


def list_segments(journal_dir: Path) -> list[SegmentRef]:
    """Every segment file in the journal directory, oldest epoch and sequence first."""
    found = []
    for name in regular_files_in(journal_dir):
        parsed = parse_segment_name(name)
        if parsed is not None:
            found.append(SegmentRef(*parsed, journal_dir / name))
    return sorted(found)


def epoch_tails(segments: list[SegmentRef]) -> set[str]:
    """Names of the last segment of each epoch: the only places a crash can tear a batch."""
    last: dict[int, SegmentRef] = {}
    for segment in segments:
        last[segment.epoch] = segment
    return {segment.name for segment in last.values()}


class DamageKind(enum.StrEnum):
    TORN_TAIL = "torn_tail"  # after the last valid batch of an epoch's last segment
    DAMAGED_BATCH = (
        "damaged_batch"  # anywhere else: a valid batch follows, or the segment is sealed
    )
    BAD_SEGMENT_HEADER = "bad_segment_header"
    # An intact header of a format version this reader does not know: recovery refuses.
    UNSUPPORTED_VERSION = "unsupported_version"


@dataclass(frozen=True)
class Damage:
    """A byte range recovery could not use, and why."""

    kind: DamageKind
    segment: str
    offset: int
    length: int
    reason: str


@dataclass(frozen=True)
class BatchAt:
    """A valid batch: where it starts and its header."""

    offset: int
    header: fmt.BatchHeader


@dataclass
class SegmentScan:
    """What one pass over a segment found."""

    segment: SegmentRef
    header: fmt.SegmentHeader | None
    size: int
    batches: list[BatchAt] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)
    fenced_offset: int | None = None  # where fenced bytes start, if any
    fenced_batches: int = 0
    fenced_records: int = 0
    valid_end: int = 0  # end of the last valid, unfenced batch (or of the header)


def open_journal_file(path: Path) -> BinaryIO:
    """Open a segment or checkpoint for reading; the share is untrusted input.

    A symlink is never followed and a FIFO or device is refused (``OSError``),
    so a planted entry with a journal file's name cannot hang recovery.
    """
    return os.fdopen(open_regular(path), "rb")


def highest_served_epoch(journal_dir: Path) -> int:
    """The highest epoch the journal shows a master wrote: the newest segment that starts with
    an intact header of its own epoch (0 if none, or no journal yet).

    The share's own evidence, independent of whatever coordinates the claims: an epoch
    whose master wrote a segment was claimed. A node whose coordinator (ZooKeeper) says
    the latest claim is below it must not believe the coordinator (docs/safety.md,
    "Coordination on ZooKeeper": the epoch floor).
    """
    for segment in reversed(list_segments(journal_dir)):
        if has_own_header(segment):
            return segment.epoch
    return 0


def has_own_header(segment: SegmentRef) -> bool:
    """Does the file start with an intact segment header of the epoch its name says?

    A master writes the header before any batch, so a file without one holds nothing
    a master wrote: a planted name, or a segment torn at its creation.
    """
    try:
        with open_journal_file(segment.path) as handle:
            head = handle.read(2**16)  # the header length is a u16
        return fmt.decode_segment_header(head).epoch == segment.epoch
    except (OSError, fmt.FormatError):
        return False


def read_segment(segment: SegmentRef) -> bytes:
    """A whole segment in memory (the replay decodes it at once; recovery reads a piece at
    a time through ``open_segment``)."""
    with open_journal_file(segment.path) as handle:
        return handle.read()


# What a scan holds in memory at most besides one batch: CRCs and searches go a chunk at a time.
SCAN_CHUNK_BYTES = 1 << 20
# A segment header is its fixed part and the node id (a u16 length) padded to 8.
SEGMENT_HEADER_MAX_BYTES = fmt.SEGMENT_HEADER_FIXED_LEN + 0xFFFF + fmt.ALIGNMENT


class SegmentSource(Protocol):
    """A segment's bytes, read a range at a time."""

    @property
    def size(self) -> int: ...

    def read(self, offset: int, length: int) -> bytes | memoryview:
        """Up to ``length`` bytes from ``offset`` (fewer at the end of the segment)."""
        ...


class BytesSource:
    """A segment already in memory (the replay's, and tests')."""

    def __init__(self, data: bytes | memoryview) -> None:
        self._view = memoryview(data)
        self.size = len(data)

    def read(self, offset: int, length: int) -> memoryview:
        return self._view[offset : offset + length]


class FileSource:
    """A segment on the share, read with ``pread`` a window at a time: never whole in memory,
    and no system call per small read. Its size is the file's when opened; what a live
    writer appends after that is not seen.

    ``scan_from``: where the reader means to scan on from (a checkpoint's or a follower's
    position). Reads before it (the segment header, a first batch's fence) are read as
    asked, no window around them: a tail scanned from a position costs the header and the
    bytes past the position, not the window of 4 MiB at offset 0 it cost each segment
    before (issue 44: 110 to 310 ms of a takeover with 8 or 9 epoch tails).
    ``bytes_read`` counts what was read, so recovery reports what it read, not the sizes.
    """

    def __init__(self, handle: BinaryIO, scan_from: int = 0) -> None:
        self._fd = handle.fileno()
        self.size = os.fstat(self._fd).st_size
        self._scan_from = scan_from
        self._window = b""
        self._window_start = 0
        self.bytes_read = 0

    def read(self, offset: int, length: int) -> bytes | memoryview:
        length = max(0, min(length, self.size - offset))
        start = offset - self._window_start
        if start >= 0 and start + length <= len(self._window):
            return memoryview(self._window)[start : start + length]
        if length > SCAN_CHUNK_BYTES or offset < self._scan_from:
            return self._pread(length, offset)  # a big batch, or before the scan: not kept
        want = min(max(length, 4 * SCAN_CHUNK_BYTES), self.size - offset)
        self._window = self._pread(want, offset)
        self._window_start = offset
        return memoryview(self._window)[:length]

    def _pread(self, length: int, offset: int) -> bytes:
        data = os.pread(self._fd, length, offset)
        self.bytes_read += len(data)
        return data


@contextmanager
def open_segment(path: Path, scan_from: int = 0) -> Iterator[FileSource]:
    with open_journal_file(path) as handle:
        yield FileSource(handle, scan_from)


# ``open_segment``'s ``scan_from`` for a reader of a few pieces, no scan: nothing windowed.
NO_SCAN = MAX_U64


def check_batch_at(
    source: SegmentSource, offset: int
) -> tuple[fmt.BatchStatus, fmt.BatchHeader | None]:
    """``fmt.check_batch`` on a source: the header, then the CRC a chunk at a time, so a
    header claiming any length costs no more memory than a chunk."""
    head = source.read(offset, fmt.BATCH_HEADER_LEN)
    status, header = fmt.check_batch_header(head, 0, source.size - offset)
    if status is not fmt.BatchStatus.OK or header is None:
        return status, header
    crc = 0
    position, end = offset + fmt.BATCH_CRC_START, offset + header.batch_len
    while position < end:
        piece = source.read(position, min(SCAN_CHUNK_BYTES, end - position))
        if not piece:
            return fmt.BatchStatus.INCOMPLETE, header  # cut short under us
        crc = crc32c.crc32c(piece, crc)
        position += len(piece)
    return (fmt.BatchStatus.OK if crc == header.crc32c else fmt.BatchStatus.BAD_CRC), header


def scan_segment(
    segment: SegmentRef,
    data: bytes | memoryview | SegmentSource,
    *,
    start_offset: int = 0,
    fence_limit: int | None = None,
    is_epoch_tail: bool = False,
) -> SegmentScan:
    """Classify every byte of ``data`` from ``start_offset`` on (see docs/journal-format.md).

    ``fence_limit`` is the length a later epoch's fence allows (0: the whole
    segment is fenced); batches that do not end within it are fenced writes.
    Linear in the segment's size, whatever its bytes, and holding a chunk of it
    at a time.
    """
    source = BytesSource(data) if isinstance(data, (bytes, memoryview)) else data
    size = source.size
    scan = SegmentScan(segment, None, size)
    head = read_segment_head(source)
    try:
        scan.header = fmt.decode_segment_header(head)
    except fmt.UnsupportedFormatVersion as exc:
        if fence_limit == 0:
            scan.fenced_offset = 0
        else:
            scan.damage.append(
                Damage(DamageKind.UNSUPPORTED_VERSION, segment.name, 0, size, str(exc))
            )
        return scan
    except fmt.FormatError as exc:
        if fence_limit == 0:
            scan.fenced_offset = 0
        elif is_epoch_tail and _looks_torn(head):
            scan.damage.append(Damage(DamageKind.TORN_TAIL, segment.name, 0, size, str(exc)))
        else:
            scan.damage.append(
                Damage(DamageKind.BAD_SEGMENT_HEADER, segment.name, 0, size, str(exc))
            )
        return scan
    offset = max(start_offset, scan.header.header_len)
    scan.valid_end = offset
    limit = size if fence_limit is None else min(fence_limit, size)
    budget = _ResyncBudget(2 * size + _RESYNC_SLACK_BYTES)
    while offset < size:
        status, header = check_batch_at(source, offset)
        if status is fmt.BatchStatus.OK and header is not None:
            if offset + header.batch_len > limit:
                break
            scan.batches.append(BatchAt(offset, header))
            offset += header.batch_len
            scan.valid_end = offset
            continue
        if offset >= limit:
            break
        next_valid = _next_valid_batch(source, offset, header, budget)
        reason = status.value
        if next_valid is None:
            kind = DamageKind.TORN_TAIL if is_epoch_tail else DamageKind.DAMAGED_BATCH
            end = limit
            if budget.spent:
                reason += f"; not searched further (over {budget.allowed} bytes of checks)"
        else:
            kind, end = DamageKind.DAMAGED_BATCH, min(next_valid, limit)
        scan.damage.append(Damage(kind, segment.name, offset, end - offset, reason))
        if next_valid is None or next_valid >= limit:
            offset = end
            break
        offset = next_valid
    if offset < size and fence_limit is not None:
        scan.fenced_offset = offset
        _count_fenced(scan, source, offset)
    return scan


_HEADER_LEN = struct.Struct("<H")
_HEADER_LEN_AT = fmt.field_offset(fmt.SEGMENT_HEADER_FIELDS, "header_len")


def read_segment_head(source: SegmentSource) -> bytes | memoryview:
    """The bytes a segment header takes, as its ``header_len`` field says (up to
    ``SEGMENT_HEADER_MAX_BYTES``), for ``fmt.decode_segment_header`` to judge: a scan from a
    position reads the header's few bytes, not 64 KiB (its verdict is the same: a length
    past the file or wrong fails as it did)."""
    fixed = source.read(0, min(source.size, fmt.SEGMENT_HEADER_FIXED_LEN))
    if len(fixed) < fmt.SEGMENT_HEADER_FIXED_LEN:
        return fixed
    (header_len,) = _HEADER_LEN.unpack_from(fixed, _HEADER_LEN_AT)
    if header_len <= len(fixed):
        return fixed
    return source.read(0, min(source.size, header_len))


def _looks_torn(head: bytes | memoryview) -> bool:
    """A header cut short by a crash: shorter than a full header, or zeros where bytes were due."""
    return len(head) < fmt.SEGMENT_HEADER_FIXED_LEN or bytes(head[:8]) != fmt.SEGMENT_MAGIC


# Candidate checks allowed beyond twice the segment's size when searching past damage.
_RESYNC_SLACK_BYTES = 1 << 20


class _ResyncBudget:
    """Bytes of CRC a scan may spend checking candidate batches after damage.

    Each candidate costs the length its header claims, so a crafted region of
    headers that each claim to run to the end of the segment would make the
    search quadratic. Honest damage costs about the valid batch that follows
    it, so twice the segment's size is never reached by it; past that the rest
    of the segment is reported damaged unsearched: whoever can write such a
    region could as well have overwritten the batches behind it.
    """

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed
        self.left = allowed

    @property
    def spent(self) -> bool:
        return self.left <= 0

    def check(self, source: SegmentSource, offset: int) -> bool:
        """Whether a valid batch starts at ``offset``; False once the budget is spent."""
        if self.spent:
            return False
        status, header = check_batch_at(source, offset)
        if header is not None and status in (fmt.BatchStatus.OK, fmt.BatchStatus.BAD_CRC):
            self.left -= header.batch_len  # what the CRC ran over
        return status is fmt.BatchStatus.OK


def _next_valid_batch(
    source: SegmentSource, offset: int, header: fmt.BatchHeader | None, budget: _ResyncBudget
) -> int | None:
    """The offset of the next valid batch after a bad one, or None if none follows (or the
    budget ran out before one was found). Searched a chunk at a time."""
    if header is not None and header.batch_len > 0 and offset + header.batch_len < source.size:
        candidate = offset + header.batch_len
        if budget.check(source, candidate):
            return candidate
    magic = fmt.BATCH_MAGIC
    window_start = offset + 1
    while window_start < source.size and not budget.spent:
        # Overlapping by the magic's length less one, so no magic is cut in two.
        window = bytes(source.read(window_start, SCAN_CHUNK_BYTES + len(magic) - 1))
        found = window.find(magic)
        while found >= 0 and not budget.spent:
            position = window_start + found
            if position % fmt.ALIGNMENT == 0 and budget.check(source, position):
                return position
            found = window.find(magic, found + 1)
        window_start += SCAN_CHUNK_BYTES
    return None


def _count_fenced(scan: SegmentScan, source: SegmentSource, offset: int) -> None:
    """Count the complete batches past the fence, for the loss-averted report."""
    for batch in batches_from(source, offset):
        scan.fenced_batches += 1
        scan.fenced_records += batch.header.record_count


def batches_from(data: bytes | memoryview | SegmentSource, offset: int) -> Iterator[BatchAt]:
    """The valid batches from ``offset`` on, up to the first bytes that are not one: how the
    fenced writes past a fence are counted (``SegmentScan.fenced_batches``) and read."""
    source = BytesSource(data) if isinstance(data, (bytes, memoryview)) else data
    while offset < source.size:
        status, header = check_batch_at(source, offset)
        if status is not fmt.BatchStatus.OK or header is None:
            return
        yield BatchAt(offset, header)
        offset += header.batch_len


def iter_batches(
    data: bytes | SegmentSource, scan: SegmentScan
) -> Iterator[tuple[BatchAt, memoryview]]:
    """The valid batches of a scan with their bytes, read one batch at a time."""
    source = BytesSource(data) if isinstance(data, (bytes, memoryview)) else data
    for batch in scan.batches:
        yield batch, memoryview(source.read(batch.offset, batch.header.batch_len))
