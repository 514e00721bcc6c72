"""The POSIX lock on the share's lock file, held through exactly one descriptor.

POSIX record locks (``lockf``/``fcntl``) belong to the process and are all
dropped when the process closes *any* descriptor of the file, so this class is
the only thing in a process that ever opens the lock file: the holder record
is written and read through the same descriptor that holds the lock.
"""

from __future__ import annotations

import enum
import errno
import os
import stat
from pathlib import Path

import portalocker
from portalocker.portalocker import FlockLocker, LockfLocker

from primacy.share import safe_io
from primacy.share.layout import FILE_MODE
from primacy.share.port import LockLost
from primacy.share.records import MAX_HOLDER_BYTES, HolderInfo

# Built once: a Flag union costs more than the lock call it is for, at every commit.
_TRY_EXCLUSIVE = portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING
# The same request as a plain int, for the re-assertion at every commit (``revalidate``).
_TRY_EXCLUSIVE_BITS = int(_TRY_EXCLUSIVE)
# What fcntl raises when another holder has a conflicting lock (portalocker's AlreadyLocked).
_HELD_ELSEWHERE = (errno.EACCES, errno.EAGAIN)


class LockMethod(enum.StrEnum):
    """How the lock is taken: ``flock`` (open file description) or ``posix`` (lockf)."""

    FLOCK = "flock"
    POSIX = "posix"


def _locker_for(method: LockMethod) -> portalocker.portalocker.PosixLocker:
    return FlockLocker() if method is LockMethod.FLOCK else LockfLocker()


class ShareLock:
    """The lock file in the share, opened once and locked without blocking."""

    def __init__(self, path: Path, method: LockMethod = LockMethod.FLOCK) -> None:
        self.path = Path(path)
        self.method = method
        self._locker = _locker_for(method)
        # For ``revalidate``, run after every commit: the path as a str (no ``__fspath__``
        # call) and the fcntl call this locker takes the lock with (portalocker's public
        # ``locker``), called without ``lock()``'s flag checks (enum arithmetic, several
        # interpreted calls: most of the lock's share of a commit's fencing check).
        self._path_name = str(self.path)
        self._reassert = self._locker.locker
        self._fd: int | None = None
        self._held = False

    @property
    def held(self) -> bool:
        return self._held

    def try_acquire(self) -> bool:
        """Try once to take the lock; recreate the lock file if it is missing.

        Returns True if this process now holds the lock on the file that is
        at the lock path (not on a deleted or replaced one).
        """
        if self._held:
            return True
        self._open_current_file()
        assert self._fd is not None
        try:
            self._locker.lock(self._fd, _TRY_EXCLUSIVE)
        except portalocker.AlreadyLocked:
            return False
        # The file may have been replaced between opening and locking it:
        # a lock on a name nobody else opens any more is worth nothing.
        if not self._fd_is_current_file():
            self._locker.unlock(self._fd)
            self._close()
            return False
        self._held = True
        return True

    def revalidate(self) -> None:
        """Raise LockLost unless the lock file is still ours and the lock re-asserts.

        Re-asserting on the held descriptor also makes an NFS client go to the
        server, which revalidates its cache before the epoch is read.
        """
        if not self._held or self._fd is None:
            raise LockLost("the lock is not held")
        try:
            path_stat = os.stat(self._path_name)
        except FileNotFoundError:
            raise LockLost(f"the lock file {self.path} was deleted") from None
        except OSError as exc:
            raise LockLost(f"cannot stat the lock file: {exc}") from exc
        try:
            held_stat = os.fstat(self._fd)
        except OSError as exc:
            raise LockLost(f"the held lock descriptor fails: {exc}") from exc
        if (path_stat.st_dev, path_stat.st_ino) != (held_stat.st_dev, held_stat.st_ino):
            raise LockLost(f"the lock file {self.path} was replaced by another file")
        try:
            self._reassert(self._fd, _TRY_EXCLUSIVE_BITS)
        except OSError as exc:
            if exc.errno in _HELD_ELSEWHERE:
                raise LockLost("re-asserting the lock was refused: another holder has it") from None
            raise LockLost(f"re-asserting the lock failed: {exc}") from exc
        except EOFError as exc:  # what some network filesystems' lock calls raise
            raise LockLost(f"re-asserting the lock failed: {exc!r}") from exc

    def write_holder(self, info: HolderInfo) -> None:
        """Record the holder in the lock file, through the held descriptor, durably."""
        if self._fd is None:
            raise LockLost("the lock file is not open")
        data = info.to_bytes()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        os.fsync(self._fd)

    def read_holder(self) -> HolderInfo | None:
        """Read the holder record through this object's descriptor (never a second open)."""
        if self._fd is None:
            self._open_current_file()
        assert self._fd is not None
        return HolderInfo.from_bytes(os.pread(self._fd, MAX_HOLDER_BYTES, 0))

    def release(self, node_id: str) -> None:
        """Mark the record released, drop the lock and close the descriptor.

        The lock is dropped even when the share fails while marking the record.
        """
        try:
            if self._fd is not None and self._held:
                previous = self.read_holder()
                epoch = previous.epoch if previous else None
                self.write_holder(HolderInfo.for_this_process(node_id, epoch, released=True))
        finally:
            self.close()

    def close(self) -> None:
        """Drop the lock (if held) by closing the one descriptor."""
        self._held = False
        self._close()

    def replace_file(self) -> None:
        """Rename a fresh, empty lock file over the current one (``SharePort.replace_lock``).

        Never through the held descriptor's file: a new name, created exclusively
        beside the lock file (a planted entry under it is removed, never followed),
        synced, renamed over, and the rename made durable. Our own descriptor of
        the old file is closed, so the next ``try_acquire`` opens the new one.
        """
        self.close()
        fresh = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
        fd = safe_io.create_new_file(fresh, os.O_RDWR, FILE_MODE, share_root=True)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        safe_io.replace_within(fresh, self.path, share_root=True)
        safe_io.fsync_directory(self.path.parent, share_root=True)

    def _open_current_file(self) -> None:
        if self._fd is not None and self._fd_is_current_file():
            return
        self._close()
        # Never through a symlink (the holder record would be written wherever it points),
        # and never a FIFO or device: the share is untrusted input. (O_RDWR opens a FIFO
        # without blocking; O_NONBLOCK is not used, as it would turn a lease another process
        # holds on the file into an error instead of a wait.)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        except OSError as exc:
            if exc.errno == errno.EISDIR:  # nothing we may remove
                raise OSError(exc.errno, f"{self.path} is not a regular file; remove it") from None
            if exc.errno != errno.ELOOP:
                raise
            fd = self._replace_planted_entry()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            fd = self._replace_planted_entry()
        self._fd = fd

    def _replace_planted_entry(self) -> int:
        """A symlink, FIFO or device has the lock file's name: remove it (never following it)
        and create the file afresh, so a planted entry cannot keep the group without a master.

        As safe as a lock file deleted or replaced under a master, which fencing already
        covers (docs/safety.md): whoever locks the new file must claim a later epoch, which
        stops a master still locking the old one before it acknowledges anything more, and
        then waits out that master's lease before serving.
        """
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as exc:  # a directory, say: nothing we may remove
            raise OSError(exc.errno, f"{self.path} is not a regular file; remove it") from exc
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
        except FileExistsError:  # another node recreated it first: that one is the lock file
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW, FILE_MODE)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OSError(
                    errno.EINVAL, f"{self.path} is not a regular file; remove it"
                ) from None
            return fd

    def _fd_is_current_file(self) -> bool:
        assert self._fd is not None
        try:
            path_stat = os.lstat(self.path)  # a symlink to the held file is not the file
            held_stat = os.fstat(self._fd)
        except OSError:
            return False
        return (path_stat.st_dev, path_stat.st_ino) == (held_stat.st_dev, held_stat.st_ino)

    def _close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass


def read_holder_from_outside(path: Path) -> HolderInfo | None:
    """Read the holder record from a process that does not hold and will not take the lock.

    Used by ``primacy status --share``. A supervisor must use
    ``ShareLock.read_holder`` instead: opening and closing the file a second
    time would drop its own POSIX lock.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        return HolderInfo.from_bytes(os.read(fd, MAX_HOLDER_BYTES))
    finally:
        os.close(fd)


def held_by_another(path: Path, method: LockMethod) -> bool | None:
    """Whether someone holds the lock on the lock file at ``path``, asked by a process that
    will not keep it (``primacy doctor``): it tries the lock once without blocking and lets
    it go at once. None if there is no lock file, or it cannot be opened to try (``posix``
    needs it writable). Never creates the file; never for a process that may hold the lock
    (closing this descriptor would drop a POSIX lock of its own)."""
    flags = (os.O_RDONLY if method is LockMethod.FLOCK else os.O_RDWR) | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    locker = _locker_for(method)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            locker.lock(fd, _TRY_EXCLUSIVE)
        except portalocker.AlreadyLocked:
            return True
        except (portalocker.LockException, OSError):
            return None
        locker.unlock(fd)
        return False
    finally:
        os.close(fd)
