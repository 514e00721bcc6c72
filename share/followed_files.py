"""The share port's part for following a journal: a revalidating read of a file another node
appends.

A slave follows the journal a master writes (``store/follower.py``); what it needs
of the share is one operation, ``open_revalidated``: a file opened so that its size,
and the bytes up to it, are what the writer had made visible when the open was sent,
with the file's identity, so that another file under the same name is never taken
for the one followed. NFS is close-to-open consistent: a client sees another
client's appends only after an open (which revalidates the file's attributes with
the server) and not through an open it already holds. Every poll therefore opens
afresh, here, in one place, and reads only through what that open gave; ``stat``
(an identity and size without reading) answers from a fresh lookup too, so a
replaced or truncated file is seen by the next call.

Backends: ``PosixFollowedFiles`` (NFSv4, GFS2, a local disk: the journal of every
coordination, ZooKeeper's included, lives on a filesystem) and
``share/memory_files.py``'s in-memory files, for fast tests, which keep the same
contract (``tests/share/test_followed_files.py`` runs the same tests on both):

- ``open_revalidated`` raises ``FileNotFoundError`` for a missing name; the file it
  returns has the ``identity`` and ``size`` of that open, and reads never go past
  ``size``: what is appended after the open is seen only by the next open;
- a file replaced under its name (removed and created, renamed over) has another
  identity; a file appended to or truncated keeps its identity and changes size;
- ``stat`` gives the same identity and the current size, or None if the name is gone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from primacy.share.safe_io import open_regular

# A read of a small piece reads this much around it: one system call per window, not per read.
READ_WINDOW_BYTES = 256 * 1024


@dataclass(frozen=True)
class FileIdentity:
    """Which file a name named: another file created under the name has another identity."""

    device: int
    inode: int


@dataclass(frozen=True)
class FileStat:
    identity: FileIdentity
    size: int


class RevalidatedFile(Protocol):
    """One fresh open of a followed file: its identity and size are those of the open."""

    @property
    def identity(self) -> FileIdentity: ...

    @property
    def size(self) -> int: ...

    def read(self, offset: int, length: int) -> bytes | memoryview:
        """Up to ``length`` bytes from ``offset``, never past ``size`` (short at the end)."""

    def close(self) -> None: ...


class FollowedFiles(Protocol):
    """What a journal follower asks of the share (the module's docstring: the contract)."""

    def open_revalidated(self, path: Path) -> RevalidatedFile: ...

    def stat(self, path: Path) -> FileStat | None: ...


class _PosixFile:
    def __init__(self, fd: int) -> None:
        self._fd = fd
        info = os.fstat(fd)
        self.identity = FileIdentity(info.st_dev, info.st_ino)
        self.size = info.st_size
        self._window = b""
        self._window_start = 0

    def read(self, offset: int, length: int) -> bytes | memoryview:
        length = max(0, min(length, self.size - offset))
        start = offset - self._window_start
        if start >= 0 and start + length <= len(self._window):
            return memoryview(self._window)[start : start + length]
        if length > READ_WINDOW_BYTES:
            return os.pread(self._fd, length, offset)  # a big piece: read once, not kept
        want = min(max(length, READ_WINDOW_BYTES), self.size - offset)
        self._window = os.pread(self._fd, want, offset)
        self._window_start = offset
        return memoryview(self._window)[:length]

    def close(self) -> None:
        os.close(self._fd)


class PosixFollowedFiles:
    """Files on a mounted share: each ``open_revalidated`` is an ``open`` (close-to-open on
    NFS: the client revalidates the attributes with the server), through the share's safe
    I/O (no symlink followed, regular files only)."""

    def open_revalidated(self, path: Path) -> RevalidatedFile:
        return _PosixFile(open_regular(path))

    def stat(self, path: Path) -> FileStat | None:
        try:
            info = path.stat()
        except FileNotFoundError:
            return None
        return FileStat(FileIdentity(info.st_dev, info.st_ino), info.st_size)
