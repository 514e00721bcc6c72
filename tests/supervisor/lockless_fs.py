"""A FUSE filesystem whose locks do not work, for `primacy run`'s share check.

    python -m tests.supervisor.lockless_fs BACKING MOUNTPOINT {grant,refuse}

Files pass through to BACKING; every lock request (``flock`` and POSIX/OFD) is
answered by this daemon instead of the kernel:

- ``grant``: every request succeeds, so two descriptors both "hold" the lock,
  as on an NFS mount with ``local_lock`` seen from two hosts;
- ``refuse``: every request fails with ENOLCK, as on NFSv3 without lockd.

Runs in the foreground until unmounted (``fusermount -u``) or killed.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any

from mfusepy import FUSE, FuseOSError, Operations

_STAT_FIELDS = (
    "st_mode",
    "st_ino",
    "st_nlink",
    "st_uid",
    "st_gid",
    "st_size",
)


class LocklessPassthrough(Operations):  # type: ignore[misc]
    """Pass files through to ``backing``; answer every lock request per ``mode``."""

    use_ns = True  # times in integer nanoseconds

    def __init__(self, backing: str, mode: str) -> None:
        self.backing = backing
        self.mode = mode

    def _real(self, path: str) -> str:
        return os.path.join(self.backing, path.lstrip("/"))

    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        try:
            stat = os.lstat(self._real(path))
        except FileNotFoundError:
            raise FuseOSError(errno.ENOENT) from None
        attrs: dict[str, Any] = {name: getattr(stat, name) for name in _STAT_FIELDS}
        attrs.update(
            st_atime=stat.st_atime_ns, st_mtime=stat.st_mtime_ns, st_ctime=stat.st_ctime_ns
        )
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        return os.open(self._real(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)

    def open(self, path: str, flags: int) -> int:
        return os.open(self._real(path), flags & ~(os.O_CREAT | os.O_EXCL))

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        os.truncate(self._real(path), length)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(self._real(path))
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._real(path), mode)
        return 0

    def lock(self, path: str, fh: int, cmd: int, lock: Any) -> int:
        return self._answer()

    def flock(self, path: str, fh: int, op: int) -> int:
        return self._answer()

    def _answer(self) -> int:
        if self.mode == "refuse":
            raise FuseOSError(errno.ENOLCK)
        return 0


def main(argv: list[str]) -> int:
    backing, mountpoint, mode = argv
    if mode not in ("grant", "refuse"):
        raise SystemExit(f"mode must be grant or refuse, not {mode!r}")
    FUSE(
        LocklessPassthrough(os.path.abspath(backing), mode),
        mountpoint,
        foreground=True,
        fsname=f"lockless-{mode}",
        subtype="lockless",
        attr_timeout=0,
        entry_timeout=0,
        negative_timeout=0,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
