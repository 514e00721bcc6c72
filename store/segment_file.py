"""The one journal segment a master appends to: one write per batch, rotated past the size
limit, synced on demand (the writer's, store/writer.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from primacy.share.safe_io import create_exclusive, fsync_directory
from primacy.store import format as fmt
from primacy.store.segments import segment_name


class SegmentFile:
    """The one segment this writer appends to; rotates to a new file past the size limit."""

    def __init__(self, journal_dir: Path, epoch: int, node_id: str, max_bytes: int) -> None:
        self.journal_dir = journal_dir
        self.epoch = epoch
        self.node_id = node_id
        self.max_bytes = max_bytes
        self.fd: int | None = None
        self.name = ""
        self.size = 0
        self.header_len = 0
        # Our own segments finished since ``take_sealed`` last asked, and their lengths.
        self._sealed: dict[str, int] = {}

    def write(self, batch: bytes, first_sequence: int) -> int:
        """Append one batch in one write call (rotating first if it would not fit); its offset."""
        if self.fd is None or (
            self.size + len(batch) > self.max_bytes and self.size > self.header_len
        ):
            self._rotate(first_sequence)
        assert self.fd is not None
        offset = self.size
        view = memoryview(batch)
        written = os.write(self.fd, view)
        while written < len(view):  # short writes happen on full disks and signals
            written += os.write(self.fd, view[written:])
        self.size += len(batch)
        return offset

    def take_sealed(self) -> dict[str, int]:
        """The segments finished since the last call, with their lengths (each told once)."""
        sealed, self._sealed = self._sealed, {}
        return sealed

    def sync(self) -> None:
        if self.fd is not None:
            os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)

    def _rotate(self, first_sequence: int) -> None:
        if self.fd is not None:
            self.close()
            self._sealed[self.name] = self.size
        name = segment_name(self.epoch, first_sequence)
        header = fmt.encode_segment_header(
            fmt.SegmentHeader(self.epoch, first_sequence, self.node_id, time.time_ns())
        )
        # In the journal directory itself, never through a symlink put in its place.
        fd = create_exclusive(self.journal_dir / name, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, header)
            os.fdatasync(fd)
            fsync_directory(self.journal_dir)  # the new name must survive a crash too
        except OSError:
            os.close(fd)
            raise
        self.fd, self.name, self.size, self.header_len = fd, name, len(header), len(header)
