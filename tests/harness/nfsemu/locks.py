"""Open files and the locks a mount holds on the server, as open-file-description locks.

The kernel hands FUSE a ``lock_owner`` with every lock request: the process's
file table for POSIX (``lockf``/``fcntl``) locks, the open file for ``flock``.
NFS servers key locks the same way, so this table keeps one backing
descriptor per (backing file, lock owner) and takes the real lock on it with
``F_OFD_SETLK``. Open-file-description locks conflict between descriptors
(never within one), so owners conflict with each other across every mount
sharing the backing directory, and ``flock`` and POSIX locks exclude each other
as they do on NFSv4, where ``flock`` is sent as a whole-file POSIX lock.

When the lease expires the server forgets all of this mount's locks: every
owner descriptor is closed, and every open file that held a lock is marked
lost, so later I/O through it fails with EIO (Linux's NFS client does the same
for lock state it could not recover).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading
from dataclasses import dataclass, field

from mfusepy import FuseOSError

# struct flock on Linux x86_64/aarch64: short type, short whence, off_t start,
# off_t len, pid_t pid, with the padding the C compiler inserts.
_STRUCT_FLOCK = struct.Struct("hh4xqqi4x")

FileKey = tuple[int, int]  # (st_dev, st_ino) of the backing file
OwnerKey = tuple[FileKey, int]  # (backing file, FUSE lock_owner)


@dataclass
class OpenFile:
    """One FUSE file handle: a descriptor on the backing file."""

    fd: int
    file: FileKey
    lock_owners: set[int] = field(default_factory=set)
    lost: bool = False


@dataclass(frozen=True)
class LockRange:
    """A POSIX lock request or answer: type (F_RDLCK, F_WRLCK, F_UNLCK) and byte range."""

    kind: int
    start: int = 0
    length: int = 0  # 0 means to the end of the file, as in struct flock

    @property
    def whole_file(self) -> bool:
        return self.start == 0 and self.length == 0


def _ofd_fcntl(fd: int, command: int, wanted: LockRange) -> LockRange:
    packed = _STRUCT_FLOCK.pack(wanted.kind, os.SEEK_SET, wanted.start, wanted.length, 0)
    kind, _whence, start, length, _pid = _STRUCT_FLOCK.unpack(fcntl.fcntl(fd, command, packed))
    return LockRange(kind, start, length)


class LockTable:
    """The open files of one mount and the locks held for them on the backing files."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._files: dict[int, OpenFile] = {}
        self._next_handle = 1
        self._owner_fds: dict[OwnerKey, int] = {}
        # Unlocks and closes that arrived during a partition, applied on heal.
        self._deferred_unlocks: list[tuple[int, int, LockRange]] = []  # (handle, owner, range)
        self._deferred_releases: list[int] = []

    # --- open files -------------------------------------------------------

    def add(self, fd: int) -> int:
        stat = os.fstat(fd)
        with self._mutex:
            handle = self._next_handle
            self._next_handle += 1
            self._files[handle] = OpenFile(fd, (stat.st_dev, stat.st_ino))
            return handle

    def get(self, handle: int) -> OpenFile:
        """The open file, or EIO if its locks were lost with an expired lease."""
        with self._mutex:
            open_file = self._files.get(handle)
        if open_file is None:
            raise FuseOSError(errno.EBADF)
        if open_file.lost:
            raise FuseOSError(errno.EIO)
        return open_file

    def release(self, handle: int, flock_owner: int | None) -> None:
        """Close a handle; drop the ``flock`` owner's lock that dies with the open file."""
        with self._mutex:
            open_file = self._files.pop(handle, None)
            if open_file is None:
                return
            if flock_owner is not None:
                self._close_owner_locked((open_file.file, flock_owner))
        os.close(open_file.fd)

    def defer_unlock(self, handle: int, owner: int, wanted: LockRange) -> None:
        with self._mutex:
            self._deferred_unlocks.append((handle, owner, wanted))

    def defer_release(self, handle: int, flock_owner: int | None) -> None:
        with self._mutex:
            self._deferred_releases.append(handle)
            if flock_owner is not None:
                self._deferred_unlocks.append((handle, flock_owner, LockRange(fcntl.F_UNLCK)))

    # --- locks ------------------------------------------------------------

    def try_lock(self, handle: int, owner: int, wanted: LockRange) -> bool:
        """Take or change ``owner``'s lock without waiting; False if another owner conflicts."""
        open_file = self.get(handle)
        key = (open_file.file, owner)
        with self._mutex:
            fd = self._owner_fds.get(key)
            opened_here = fd is None
            if fd is None:
                if wanted.kind == fcntl.F_UNLCK:
                    return True
                fd = self._owner_fds[key] = self._open_owner_fd(open_file, wanted.kind)
            if wanted.kind == fcntl.F_UNLCK:
                self._unlock_locked(open_file, owner, wanted)
                return True
            try:
                _ofd_fcntl(fd, fcntl.F_OFD_SETLK, wanted)
            except OSError as exc:
                if opened_here:
                    self._close_owner_locked(key)
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    return False
                raise
            open_file.lock_owners.add(owner)
            return True

    def test_lock(self, handle: int, owner: int, wanted: LockRange) -> LockRange:
        """The first lock of another owner that conflicts with ``wanted`` (F_UNLCK if none)."""
        open_file = self.get(handle)
        with self._mutex:
            fd = self._owner_fds.get((open_file.file, owner))
            if fd is not None:
                return _ofd_fcntl(fd, fcntl.F_OFD_GETLK, wanted)
        probe = self._open_owner_fd(open_file, wanted.kind)
        try:
            return _ofd_fcntl(probe, fcntl.F_OFD_GETLK, wanted)
        finally:
            os.close(probe)

    def held_count(self) -> int:
        with self._mutex:
            return len(self._owner_fds)

    def snapshot(self) -> dict[str, int]:
        with self._mutex:
            return {
                "open_files": len(self._files),
                "lost_files": sum(1 for f in self._files.values() if f.lost),
                "lock_owners": len(self._owner_fds),
                "deferred_unlocks": len(self._deferred_unlocks),
                "deferred_releases": len(self._deferred_releases),
            }

    # --- lease events -----------------------------------------------------

    def expire(self) -> None:
        """The server forgot this client: drop every lock and lose the files that held one."""
        with self._mutex:
            for key in list(self._owner_fds):
                self._close_owner_locked(key)
            for open_file in self._files.values():
                if open_file.lock_owners:
                    open_file.lost = True
                    open_file.lock_owners.clear()

    def apply_deferred(self) -> None:
        """On heal: carry out the unlocks and closes the partition held back."""
        with self._mutex:
            unlocks, self._deferred_unlocks = self._deferred_unlocks, []
            releases, self._deferred_releases = self._deferred_releases, []
            for handle, owner, wanted in unlocks:
                open_file = self._files.get(handle)
                if open_file is not None:
                    self._unlock_locked(open_file, owner, wanted)
        for handle in releases:
            self.release(handle, None)

    def close_all(self) -> None:
        with self._mutex:
            for key in list(self._owner_fds):
                self._close_owner_locked(key)
            files, self._files = self._files, {}
        for open_file in files.values():
            os.close(open_file.fd)

    def _open_owner_fd(self, open_file: OpenFile, kind: int) -> int:
        # Reopen the very inode the handle has open (it may have been renamed
        # or unlinked since), in a mode that allows the lock type asked for.
        path = f"/proc/self/fd/{open_file.fd}"
        try:
            return os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            mode = os.O_WRONLY if kind == fcntl.F_WRLCK else os.O_RDONLY
            return os.open(path, mode | os.O_CLOEXEC)

    def _unlock_locked(self, open_file: OpenFile, owner: int, wanted: LockRange) -> None:
        key = (open_file.file, owner)
        fd = self._owner_fds.get(key)
        if fd is None:
            return
        if not wanted.whole_file:
            _ofd_fcntl(fd, fcntl.F_OFD_SETLK, wanted)
            return
        # Nothing of this owner is left on the file: give the descriptor back.
        self._close_owner_locked(key)
        for other in self._files.values():
            if other.file == open_file.file:
                other.lock_owners.discard(owner)

    def _close_owner_locked(self, key: OwnerKey) -> None:
        fd = self._owner_fds.pop(key, None)
        if fd is not None:
            os.close(fd)
