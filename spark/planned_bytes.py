"""A planned segment's bytes, read into buffers a worker reuses (the replay's reader's input).

Reading a segment into fresh memory costs twice a read into memory already
touched, so each worker lends itself one buffer for segment after segment;
``PlannedBytes`` reads no further than the length the plan saw.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO


class ReadBuffers:
    """Buffers a reader lends for a segment's bytes and takes back when done with it.

    Reading a segment into fresh memory costs twice a read into memory already
    touched (the kernel zero-fills and maps every page on first write), and the
    replay reads segment after segment in the same worker: it keeps one buffer,
    the last one returned. Nothing yielded refers to a lent buffer (the decoder
    copies, ``decode_batches(copy=True)``), so the rows stay valid after it is
    reused. A buffer is never resized, only replaced: a view of it may outlive
    the loan (in a traceback, say), and a bytearray with views cannot change size.
    """

    def __init__(self) -> None:
        self._free: list[bytearray] = []
        self._lock = threading.Lock()

    @contextmanager
    def lend(self) -> Iterator[Loan]:
        with self._lock:
            loan = Loan(self._free.pop() if self._free else bytearray())
        try:
            yield loan
        finally:
            with self._lock:
                self._free[:] = [loan.buffer]


@dataclass
class Loan:
    buffer: bytearray

    def at_least(self, size: int) -> bytearray:
        if len(self.buffer) < size:
            self.buffer = bytearray(size)
        return self.buffer


READ_BUFFERS = ReadBuffers()


class PlannedBytes:
    """The segment's bytes up to its planned length, read with ``preadv`` where asked: a
    range's task reads the headers on its way and its own batches, not the whole file."""

    def __init__(self, handle: BinaryIO, size_bytes: int, loan: Loan) -> None:
        self._fd = handle.fileno()
        self.size = min(os.fstat(self._fd).st_size, size_bytes)
        self._loan = loan

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset``, a copy of their own (for small reads)."""
        return bytes(self._read_into(Loan(bytearray()), offset, length))

    def read_span(self, offset: int, length: int) -> memoryview:
        """``read`` into the lent buffer: valid until the next ``read_span``."""
        return self._read_into(self._loan, offset, length)

    def _read_into(self, loan: Loan, offset: int, length: int) -> memoryview:
        """Up to ``length`` bytes from ``offset``; fewer past the planned length or if the file
        shrank. A loop: one ``preadv`` reads at most about 2 GiB."""
        wanted = max(0, min(length, self.size - offset))
        view, done = memoryview(loan.at_least(wanted)), 0
        while done < wanted:
            got = os.preadv(self._fd, [view[done:wanted]], offset + done)
            if not got:
                break
            done += got
        return view[:done]
