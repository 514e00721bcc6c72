"""The followed-files port in memory (``share/followed_files.py``): files as byte arrays, for
fast tests of a follower, with the same contract as the POSIX files.

A test writes through ``append``, ``replace`` (another file under the name: a new identity),
``truncate`` and ``remove``; a reader's ``open_revalidated`` takes a copy of the bytes at
that moment, as a close-to-open client sees the file as of its open.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from pathlib import Path

from primacy.share.followed_files import FileIdentity, FileStat, RevalidatedFile

_MEMORY_DEVICE = 0


@dataclass
class _Entry:
    identity: FileIdentity
    data: bytearray


@dataclass(frozen=True)
class _Snapshot:
    identity: FileIdentity
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, length: int) -> bytes | memoryview:
        return memoryview(self.data)[offset : offset + max(0, length)]

    def close(self) -> None:
        pass


class MemoryFollowedFiles:
    def __init__(self) -> None:
        self._files: dict[Path, _Entry] = {}
        self._inodes = itertools.count(1)
        self._lock = threading.Lock()

    # ---- the writer's side (a test's) ---------------------------------------------------------

    def append(self, path: Path, data: bytes) -> None:
        with self._lock:
            entry = self._files.get(path)
            if entry is None:
                entry = self._files[path] = _Entry(self._new_identity(), bytearray())
            entry.data += data

    def replace(self, path: Path, data: bytes) -> None:
        with self._lock:
            self._files[path] = _Entry(self._new_identity(), bytearray(data))

    def truncate(self, path: Path, size: int) -> None:
        with self._lock:
            del self._files[path].data[size:]

    def remove(self, path: Path) -> None:
        with self._lock:
            del self._files[path]

    # ---- the port ---------------------------------------------------------------------------

    def open_revalidated(self, path: Path) -> RevalidatedFile:
        with self._lock:
            entry = self._files.get(path)
            if entry is None:
                raise FileNotFoundError(2, "no such file", str(path))
            return _Snapshot(entry.identity, bytes(entry.data))

    def stat(self, path: Path) -> FileStat | None:
        with self._lock:
            entry = self._files.get(path)
            return None if entry is None else FileStat(entry.identity, len(entry.data))

    def _new_identity(self) -> FileIdentity:
        return FileIdentity(_MEMORY_DEVICE, next(self._inodes))
