"""The FUSE operations of one emulated NFS client: pass through to the backing directory.

Every operation first asks the ``Network`` whether the server is reachable,
so a partition makes it fail with EIO or hang, then the ``PathFaults``
whether a per-path fault (EIO under a prefix) covers its path; fsync also
waits out the configured delay. Locks go to the ``LockTable``, which holds
them as open-file-description locks on the backing files. Closes and unlocks
that arrive during a partition are remembered and carried out on heal, so no
lock leaks on the server after a partition.

Mounted with ``raw_fi=True``: handlers get the ``fuse_file_info`` (its ``fh``,
``lock_owner`` and ``flock_release``), not just the handle number.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from typing import Any

from mfusepy import FuseOSError, Operations

from tests.harness.nfsemu.faults import PathFaults
from tests.harness.nfsemu.locks import LockRange, LockTable
from tests.harness.nfsemu.network import Mode, Network

# How often a blocking lock request (F_SETLKW, flock without LOCK_NB) retries.
# Polling, not F_OFD_SETLKW, so a partition or shutdown still reaches a waiter.
_LOCK_RETRY_S = 0.01

_FLOCK_KINDS = {
    fcntl.LOCK_SH: fcntl.F_RDLCK,
    fcntl.LOCK_EX: fcntl.F_WRLCK,
    fcntl.LOCK_UN: fcntl.F_UNLCK,
}

_STAT_FIELDS = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")
_STATVFS_FIELDS = (
    "f_bsize",
    "f_frsize",
    "f_blocks",
    "f_bfree",
    "f_bavail",
    "f_files",
    "f_ffree",
    "f_favail",
    "f_flag",
    "f_namemax",
)


def _stat_dict(stat: os.stat_result) -> dict[str, Any]:
    attrs: dict[str, Any] = {name: getattr(stat, name) for name in _STAT_FIELDS}
    attrs["st_atime"] = stat.st_atime_ns
    attrs["st_mtime"] = stat.st_mtime_ns
    attrs["st_ctime"] = stat.st_ctime_ns
    return attrs


class PassthroughClient(Operations):  # type: ignore[misc]
    """One client mount of the backing directory, behind an emulated network."""

    use_ns = True  # times in integer nanoseconds

    def __init__(
        self, backing: str, network: Network, locks: LockTable, faults: PathFaults
    ) -> None:
        self.backing = backing
        self.network = network
        self.locks = locks
        self.faults = faults

    def _gate(self, path: str | None) -> None:
        """Pass only if the server is reachable and no per-path fault covers ``path``."""
        self.network.gate()
        self.faults.check(path)

    def _real(self, path: str) -> str:
        return os.path.join(self.backing, path.lstrip("/"))

    # --- names and attributes ---------------------------------------------

    def getattr(self, path: str, fi: Any = None) -> dict[str, Any]:
        self._gate(path)
        if fi is not None and fi.fh:
            return _stat_dict(os.fstat(self.locks.get(fi.fh).fd))
        return _stat_dict(os.lstat(self._real(path)))

    def access(self, path: str, amode: int) -> int:
        self._gate(path)
        if not os.access(self._real(path), amode):
            raise FuseOSError(errno.EACCES)
        return 0

    def readdir(self, path: str, fh: int) -> list[tuple[str, dict[str, int], int]]:
        self._gate(path)
        # Each entry carries its inode: with use_ino the kernel passes st_ino on as
        # d_ino, and a bare name would get 0, which readdir(3) skips as a deleted entry.
        real = self._real(path)
        entries = [(".", os.lstat(real)), ("..", os.lstat(os.path.dirname(real) or real))]
        with os.scandir(real) as found:
            for entry in found:
                try:
                    entries.append((entry.name, entry.stat(follow_symlinks=False)))
                except FileNotFoundError:
                    continue  # removed since the listing: as if listed a moment later
        return [(name, {"st_ino": st.st_ino, "st_mode": st.st_mode}, 0) for name, st in entries]

    def opendir(self, path: str) -> int:
        self._gate(path)
        if not os.path.isdir(self._real(path)):
            raise FuseOSError(errno.ENOTDIR)
        return 0

    def releasedir(self, path: str, fh: int) -> int:
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        self._gate(path)
        fd = os.open(self._real(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    def readlink(self, path: str) -> str:
        self._gate(path)
        return os.readlink(self._real(path))

    def mknod(self, path: str, mode: int, dev: int) -> int:
        self._gate(path)
        os.mknod(self._real(path), mode, dev)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        self._gate(path)
        os.mkdir(self._real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        self._gate(path)
        os.rmdir(self._real(path))
        return 0

    def unlink(self, path: str) -> int:
        self._gate(path)
        os.unlink(self._real(path))
        return 0

    def symlink(self, target: str, source: str) -> int:
        self._gate(target)
        os.symlink(source, self._real(target))
        return 0

    def link(self, target: str, source: str) -> int:
        self._gate(target)
        os.link(self._real(source), self._real(target))
        return 0

    def rename(self, old: str, new: str) -> int:
        self._gate(old)
        os.rename(self._real(old), self._real(new))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        self._gate(path)
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        self._gate(path)
        os.chown(self._real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        self._gate(path)
        if times is None:
            os.utime(self._real(path))
        else:
            os.utime(self._real(path), ns=times)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        self._gate(path)
        stat = os.statvfs(self._real(path))
        return {name: getattr(stat, name) for name in _STATVFS_FIELDS}

    # --- file contents ----------------------------------------------------

    def create(self, path: str, mode: int, fi: Any) -> int:
        self._gate(path)
        # The kernel's flags keep O_EXCL, so exclusive create stays atomic
        # across mounts, as NFSv4's exclusive OPEN is.
        fd = os.open(self._real(path), fi.flags | os.O_CREAT | os.O_CLOEXEC, mode)
        fi.fh = self.locks.add(fd)
        fi.direct_io = 1
        return 0

    def open(self, path: str, fi: Any) -> int:
        self._gate(path)
        flags = fi.flags & ~(os.O_CREAT | os.O_EXCL | os.O_NOCTTY)
        fd = os.open(self._real(path), flags | os.O_CLOEXEC)
        fi.fh = self.locks.add(fd)
        # No page cache: a read through another mount sees a write at once.
        fi.direct_io = 1
        return 0

    def read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
        self._gate(path)
        return os.pread(self.locks.get(fi.fh).fd, size, offset)

    def write(self, path: str, data: bytes, offset: int, fi: Any) -> int:
        self._gate(path)
        return os.pwrite(self.locks.get(fi.fh).fd, data, offset)

    def truncate(self, path: str, length: int, fi: Any = None) -> int:
        self._gate(path)
        if fi is not None and fi.fh:
            os.ftruncate(self.locks.get(fi.fh).fd, length)
        else:
            os.truncate(self._real(path), length)
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fi: Any) -> int:
        self._gate(path)
        if mode:
            raise FuseOSError(errno.EOPNOTSUPP)
        os.posix_fallocate(self.locks.get(fi.fh).fd, offset, size)
        return 0

    def flush(self, path: str, fi: Any) -> int:
        # Nothing is cached to flush (direct I/O); a close still talks to the server.
        self._gate(path)
        self.locks.get(fi.fh)
        return 0

    def fsync(self, path: str, datasync: int, fi: Any) -> int:
        self._gate(path)
        fd = self.locks.get(fi.fh).fd
        self.faults.delay_fsync()
        if datasync:
            os.fdatasync(fd)
        else:
            os.fsync(fd)
        return 0

    def release(self, path: str, fi: Any) -> int:
        # The kernel does not wait for (or report) a release, so it never
        # fails or hangs: during a partition the close waits for the heal.
        flock_owner = fi.lock_owner if fi.flock_release else None
        if self.network.partitioned:
            self.locks.defer_release(fi.fh, flock_owner)
        else:
            self.locks.release(fi.fh, flock_owner)
        return 0

    # --- locks ------------------------------------------------------------

    def lock(self, path: str, fi: Any, cmd: int, lock: Any) -> int:
        request = lock.contents
        wanted = LockRange(request.l_type, request.l_start, request.l_len)
        if cmd == fcntl.F_GETLK:
            self.network.gate()
            found = self.locks.test_lock(fi.fh, fi.lock_owner, wanted)
            request.l_type = found.kind
            if found.kind != fcntl.F_UNLCK:
                request.l_whence = os.SEEK_SET
                request.l_start = found.start
                request.l_len = found.length
                request.l_pid = 0  # the holder may be on another host
            return 0
        return self._set_lock(fi.fh, fi.lock_owner, wanted, wait=cmd == fcntl.F_SETLKW)

    def flock(self, path: str, fi: Any, op: int) -> int:
        wanted = LockRange(_FLOCK_KINDS[op & ~fcntl.LOCK_NB])
        return self._set_lock(fi.fh, fi.lock_owner, wanted, wait=not op & fcntl.LOCK_NB)

    def _set_lock(self, handle: int, owner: int, wanted: LockRange, wait: bool) -> int:
        if wanted.kind == fcntl.F_UNLCK and self.network.mode is Mode.PARTITION_EIO:
            # The caller sees EIO, but its kernel already forgot the lock:
            # release it on the server once the link is back.
            self.locks.defer_unlock(handle, owner, wanted)
        while True:
            self.network.gate()
            if self.locks.try_lock(handle, owner, wanted):
                return 0
            if not wait:
                raise FuseOSError(errno.EAGAIN)
            time.sleep(_LOCK_RETRY_S)
