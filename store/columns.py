"""The journal's layouts as numpy columns, and a run of batches checked at once.

The dtypes are derived from ``store/format.py``'s declarations, never written
out a second time. A journal written under load holds tens of thousands of
small batches per segment, so a run of them is checked the way
``fmt.check_batch`` checks one, but with a numpy call per rule instead of a
Python call per batch: the lengths walked (one ``unpack_from`` per batch), the
headers gathered into one structured array and checked together, the CRCs
computed in one ``map``. Anything that is not a clean run of batches gives
None, and the caller classifies those bytes with ``store.segments.scan_segment``:
damage is never judged here. Only the replay needs numpy; recovery never
imports this module.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import crc32c
import numpy as np
import numpy.typing as npt

from primacy.store import format as fmt

# ``struct`` codes to numpy's, little-endian; ``Ns`` (bytes) becomes ``SN``.
_NUMPY_CODES = {"B": "u1", "H": "<u2", "I": "<u4", "Q": "<u8", "q": "<i8"}


def numpy_dtype(fields: fmt.Layout) -> np.dtype[Any]:
    """The structured dtype of one of ``store/format.py``'s layouts."""
    dtype = np.dtype(
        [
            (name, f"S{code[:-1]}" if code.endswith("s") else _NUMPY_CODES[code])
            for name, code in fields
        ]
    )
    if dtype.itemsize != fmt.layout_struct(fields).size:
        raise AssertionError("a journal layout with padding: numpy and struct would disagree")
    return dtype


RECORD_DTYPE = numpy_dtype(fmt.RECORD_HEADER_FIELDS)
BATCH_HEADER_DTYPE = numpy_dtype(fmt.BATCH_HEADER_FIELDS)

_BATCH_LEN = struct.Struct("<" + dict(fmt.BATCH_HEADER_FIELDS)["batch_len"])
_BATCH_LEN_AT = fmt.field_offset(fmt.BATCH_HEADER_FIELDS, "batch_len")
_HEADER_BYTES = np.arange(fmt.BATCH_HEADER_LEN, dtype=np.int64)


@dataclass(frozen=True)
class Batches:
    """Checked batches of one buffer as columns (their headers' fields), in stored order."""

    offset: npt.NDArray[np.int64]  # in the buffer
    batch_len: npt.NDArray[np.int64]
    record_count: npt.NDArray[np.int64]
    commit_unix_ns: npt.NDArray[np.int64]
    epoch: npt.NDArray[np.uint64]
    first_sequence: npt.NDArray[np.uint64]
    heap_len: npt.NDArray[np.int64]

    @classmethod
    def of(cls, batches: Iterable[tuple[int, fmt.BatchHeader]]) -> Batches:
        """From (offset, checked header) pairs, as the store's scan gives them."""
        pairs = list(batches)

        def column(values: Iterable[int], kind: type[Any]) -> npt.NDArray[Any]:
            return np.fromiter(values, kind, len(pairs))

        return cls(
            column((offset for offset, _ in pairs), np.int64),
            column((h.batch_len for _, h in pairs), np.int64),
            column((h.record_count for _, h in pairs), np.int64),
            column((h.commit_unix_ns for _, h in pairs), np.int64),
            column((h.epoch for _, h in pairs), np.uint64),
            column((h.first_sequence for _, h in pairs), np.uint64),
            column((h.heap_len for _, h in pairs), np.int64),
        )

    def __len__(self) -> int:
        return len(self.offset)

    def where(self, keep: npt.NDArray[np.bool_] | slice) -> Batches:
        return Batches(
            self.offset[keep], self.batch_len[keep], self.record_count[keep],
            self.commit_unix_ns[keep], self.epoch[keep], self.first_sequence[keep],
            self.heap_len[keep],
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
    offsets = _walk_lengths(data, start, end)
    if offsets is None:
        return None
    if not offsets:
        return Batches.of([])
    at = np.array(offsets, dtype=np.int64)
    gathered = np.frombuffer(data, np.uint8)[at[:, None] + _HEADER_BYTES]
    headers = gathered.view(BATCH_HEADER_DTYPE).reshape(len(at))
    batch_len = headers["batch_len"].astype(np.int64)
    record_count = headers["record_count"].astype(np.int64)
    heap_len = headers["heap_len"].astype(np.int64)
    content = fmt.BATCH_HEADER_LEN + record_count * fmt.RECORD_HEADER_LEN + heap_len
    well_formed = (
        (headers["magic"] == fmt.BATCH_MAGIC)
        & (record_count >= 1)
        & (headers["record_header_len"] == fmt.RECORD_HEADER_LEN)
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
    return Batches(
        at, batch_len, record_count, headers["commit_unix_ns"].astype(np.int64),
        headers["epoch"].copy(), headers["first_sequence"].copy(), heap_len,
    )  # fmt: skip


def _walk_lengths(data: memoryview, start: int, end: int) -> list[int] | None:
    """Where each batch starts, by the length fields alone, when they lead exactly to ``end``."""
    offsets, offset = [], start
    unpack = _BATCH_LEN.unpack_from
    while offset < end:
        if end - offset < fmt.BATCH_HEADER_LEN:
            return None
        offsets.append(offset)
        (length,) = unpack(data, offset + _BATCH_LEN_AT)
        if length < fmt.BATCH_HEADER_LEN:
            return None  # also what keeps the walk moving
        offset += length
    return offsets if offset == end else None
