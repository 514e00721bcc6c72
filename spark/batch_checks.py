"""Checking a run of journal batches with a numpy call per rule, not a Python call per batch.

A journal written under load holds tens of thousands of small batches per
segment, and the replay's time went to checking them one by one
(``fmt.check_batch``: a header unpacked into an object, then a CRC call).
Here the batch lengths are walked (one ``unpack_from`` per batch), the headers
gathered into one structured array and checked by ``check_batch``'s rules at
once, and the CRCs computed in one ``map``. Anything that is not a clean run of
batches gives None, and the caller classifies those bytes the store's way
(``store.segments.scan_segment``), so damage is never judged here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import crc32c
import numpy as np
import numpy.typing as npt

from primacy.store import format as fmt

_HEADER_DTYPE = np.dtype(
    [
        ("magic", "S4"),
        ("crc32c", "<u4"),
        ("batch_len", "<u4"),
        ("record_count", "<u4"),
        ("epoch", "<u8"),
        ("first_sequence", "<u8"),
        ("commit_unix_ns", "<i8"),
        ("heap_len", "<u4"),
        ("slot_len", "<u2"),
        ("reserved", "<u2"),
    ]
)  # store/format.py's batch header
assert _HEADER_DTYPE.itemsize == fmt.BATCH_HEADER_LEN
_BATCH_LEN_AT = 8  # the batch_len field's place in the header
_U32 = struct.Struct("<I")
_HEADER_BYTES = np.arange(fmt.BATCH_HEADER_LEN, dtype=np.int64)


@dataclass(frozen=True)
class Batches:
    """Checked batches of one buffer as columns, in stored order."""

    offset: npt.NDArray[np.int64]  # in the buffer
    batch_len: npt.NDArray[np.int64]
    record_count: npt.NDArray[np.int64]
    commit_unix_ns: npt.NDArray[np.int64]

    @classmethod
    def of(cls, batches: Iterable[tuple[int, fmt.BatchHeader]]) -> Batches:
        """From (offset, checked header) pairs, as the store's scan gives them."""
        pairs = list(batches)
        return cls(
            np.fromiter((offset for offset, _ in pairs), np.int64, len(pairs)),
            np.fromiter((h.batch_len for _, h in pairs), np.int64, len(pairs)),
            np.fromiter((h.record_count for _, h in pairs), np.int64, len(pairs)),
            np.fromiter((h.commit_unix_ns for _, h in pairs), np.int64, len(pairs)),
        )

    def __len__(self) -> int:
        return len(self.offset)

    def where(self, keep: npt.NDArray[np.bool_] | slice) -> Batches:
        return Batches(
            self.offset[keep], self.batch_len[keep], self.record_count[keep],
            self.commit_unix_ns[keep],
        )  # fmt: skip

    def groups(self, group_bytes: int) -> Iterator[Batches]:
        """Consecutive groups, each ending with the batch that brings it to ``group_bytes``."""
        ends = np.cumsum(self.batch_len)
        start = 0
        while start < len(self):
            base = int(ends[start] - self.batch_len[start])
            stop = min(int(np.searchsorted(ends, base + group_bytes, side="left")) + 1, len(self))
            yield self.where(slice(start, stop))
            start = stop


def clean_batches(data: memoryview, start: int, end: int, limit: int) -> Batches | None:
    """The batches filling ``data[start:end]`` exactly, when every one passes
    ``fmt.check_batch`` and ends within ``limit``; None otherwise."""
    offsets = _walk(data, start, end)
    if offsets is None:
        return None
    if not offsets:
        return Batches.of([])
    at = np.array(offsets, dtype=np.int64)
    gathered = np.frombuffer(data, np.uint8)[at[:, None] + _HEADER_BYTES]
    headers = gathered.view(_HEADER_DTYPE).reshape(len(at))
    batch_len = headers["batch_len"].astype(np.int64)
    record_count = headers["record_count"].astype(np.int64)
    content = fmt.BATCH_HEADER_LEN + record_count * fmt.RECORD_HEADER_LEN + headers["heap_len"]
    well_formed = (
        (headers["magic"] == fmt.BATCH_MAGIC)
        & (record_count >= 1)
        & (headers["slot_len"] == fmt.RECORD_HEADER_LEN)
        & (batch_len % fmt.ALIGNMENT == 0)
        & (content <= batch_len)
        & (batch_len < content + fmt.ALIGNMENT)
        & (at + batch_len <= limit)
    )
    if not well_formed.all():
        return None
    crc_ranges = map(slice, (at + fmt.BATCH_CRC_START).tolist(), (at + batch_len).tolist())
    crcs = np.fromiter(map(crc32c.crc32c, map(data.__getitem__, crc_ranges)), np.uint32, len(at))
    if not np.array_equal(crcs, headers["crc32c"]):
        return None
    return Batches(at, batch_len, record_count, headers["commit_unix_ns"].astype(np.int64))


def _walk(data: memoryview, start: int, end: int) -> list[int] | None:
    """Where each batch starts, by the length fields alone, when they lead exactly to ``end``."""
    offsets, offset = [], start
    unpack = _U32.unpack_from
    while offset < end:
        if end - offset < fmt.BATCH_HEADER_LEN:
            return None
        offsets.append(offset)
        (length,) = unpack(data, offset + _BATCH_LEN_AT)
        if length < fmt.BATCH_HEADER_LEN:
            return None  # also what keeps the walk moving
        offset += length
    return offsets if offset == end else None
