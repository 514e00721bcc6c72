"""The FUSE operations of one host on a real NFSv4 server: every call goes through libnfs.

Where ``tests/harness/nfsemu/passthrough.py`` passes calls to a local directory
and emulates NFS, this sends them to nfs-ganesha: OPEN, LOCK, lease renewal and
expiry are the server's own. A host has I/O clients (libnfs contexts named after
it; see "I/O clients" below), one client per held lock (``locks.py``), and a
renewer, the kernel's ``renewd``: libnfs sends no RENEW, so it reads one byte
through every client's open state each third of a lease. A frozen or killed
daemon (the host's kernel) renews nothing and the server expires the host's
locks; a frozen supervisor on a live host does not. A lock whose client lost
its state is lost for good: re-asserting it fails with EIO.
"""

from __future__ import annotations

import collections
import errno
import fcntl
import itertools
import logging
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from mfusepy import FuseOSError, Operations

from tests.harness.ganesha.libnfs import NfsClient, NfsError
from tests.harness.ganesha.locks import LockOwners, ServerLink

log = logging.getLogger("nfsreal")

# The export holds the share under SHARE_DIR and each host's renewal file
# under RENEW_DIR, so renewal never shows in the share.
SHARE_DIR = "/share"
RENEW_DIR = "/renew"

_FLOCK_KINDS = {
    fcntl.LOCK_SH: fcntl.F_RDLCK,
    fcntl.LOCK_EX: fcntl.F_WRLCK,
    fcntl.LOCK_UN: fcntl.F_UNLCK,
}
_REOPEN_MASK = ~(os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_NOCTTY)
_LOCK_RETRY_S = 0.05


@dataclass
class _Io:
    """One I/O client of the host: an NFSv4 client with one open owner (libnfs 4.0 has one)."""

    client: NfsClient
    renew_handle: int
    open_inodes: collections.Counter[int] = field(default_factory=collections.Counter)
    broken: bool = False


@dataclass
class _Open:
    """One FUSE file handle: the file, and the I/O client and handle it is open through."""

    path: str
    flags: int
    inode: int
    io: _Io
    handle: int


class NfsHostClient(Operations):  # type: ignore[misc]
    """One host's mount of the share on the real server."""

    use_ns = True

    def __init__(self, link: ServerLink) -> None:
        self.link = link
        self._mutex = threading.RLock()  # guards the tables below, never held across a call
        self._ios: list[_Io] = []
        self._opens: dict[int, _Open] = {}
        self._next_fh = itertools.count(1)
        self.locks = LockOwners(link)
        self._stopping = threading.Event()
        self._new_io()
        self._renewer = threading.Thread(target=self._renew, name="renewd", daemon=True)
        self._renewer.start()

    # --- the I/O clients and their recovery ---------------------------------
    #
    # NFSv4.0 merges two OPENs of one file by one open owner into one state,
    # and libnfs 4.0 keeps a handle per OPEN with one sequence number per
    # context, so a second open of a file through the same context makes the
    # first handle's CLOSE fail (NFS4ERR_OLD_STATEID) and every later call
    # fail (NFS4ERR_BAD_SEQID). So a file is open at most once per I/O client,
    # and a host has as many I/O clients as it has opens of its busiest file.
    # A client whose state the server lost (lease expired, server restarted,
    # a sequence error) is thrown away and its files reopened on a fresh one,
    # as the kernel client recovers its opens; the call is retried once.

    def _new_io(self) -> _Io:
        name = self.link.fresh_name("io")
        client = self.link.connect(name)
        renewal = f"{RENEW_DIR}/{self.link.host_name}-{name}"
        try:
            try:
                handle = client.open(renewal, os.O_RDWR)
            except NfsError as error:  # the first boot of this host (libnfs 4.0's O_CREAT is
                if error.errno != errno.ENOENT:  # exclusive, so open first, then create)
                    raise
                handle = client.open(renewal, os.O_RDWR | os.O_CREAT, 0o600)
        except NfsError:
            client.close_context()
            raise
        io = _Io(client, handle)
        with self._mutex:
            self._ios.append(io)
        return io

    def _io_for(self, inode: int | None) -> _Io:
        """A working I/O client that does not have ``inode`` open, reserved for it: the
        caller opens it there (or gives the reservation back with ``_unreserve``)."""
        with self._mutex:
            for io in self._ios:
                if not io.broken and (inode is None or io.open_inodes[inode] == 0):
                    if inode is not None:
                        io.open_inodes[inode] += 1
                    return io
        io = self._new_io()
        if inode is not None:
            with self._mutex:
                io.open_inodes[inode] += 1
        return io

    def _unreserve(self, io: _Io, inode: int | None) -> None:
        if inode is not None:
            with self._mutex:
                io.open_inodes[inode] -= 1

    def _any_io(self) -> _Io:
        return self._io_for(None)

    def _fail(self, io: _Io, error: NfsError) -> None:
        """Throw ``io`` away and reopen its files on other clients (best effort)."""
        with self._mutex:
            if io.broken:
                return
            io.broken = True
            self._ios.remove(io)
            moved = [record for record in self._opens.values() if record.io is io]
        log.warning(
            "an I/O client lost its state (%s): %d file(s) to reopen", error.status, len(moved)
        )
        for record in moved:
            try:
                self._reopen(record)
            except OSError as exc:
                log.warning("cannot reopen %s: %s", record.path, exc)
        io.client.close_context()

    def _reopen(self, record: _Open) -> None:
        target = self._io_for(record.inode)
        try:
            handle = target.client.open(record.path, record.flags & _REOPEN_MASK)
            inode = target.client.fstat(handle).ino
            if inode != record.inode:  # replaced since: this descriptor's file is gone
                target.client.close(handle)
                raise OSError(errno.ESTALE, f"{record.path} was replaced")
        except OSError:
            self._unreserve(target, record.inode)
            raise
        with self._mutex:
            record.io, record.handle = target, handle

    def _on(self, io_of: Any, method: str, *args: Any) -> Any:
        """Call ``method`` on the I/O client ``io_of()`` picks; errors become errno values."""
        self.link.delay()
        for attempt in (1, 2):
            io = io_of()
            try:
                return getattr(io.client, method)(*args)
            except NfsError as error:
                if error.state_lost and attempt == 1:
                    self._fail(io, error)
                    continue
                raise FuseOSError(error.errno or errno.EIO) from None
            except OSError as error:
                raise FuseOSError(error.errno or errno.EIO) from None
        raise AssertionError("unreachable")

    def _call(self, method: str, *args: Any) -> Any:
        """A call that names a path: any working I/O client."""
        return self._on(self._any_io, method, *args)

    def _call_fh(self, fh: int, method: str, *args: Any) -> Any:
        """A call on an open file: through the client and handle it is open on now."""
        return self._on_handle(self._record(fh), method, *args)

    def _on_handle(self, record: _Open, method: str, *args: Any) -> Any:
        self.link.delay()
        for attempt in (1, 2):
            if record.io.broken:
                # Not reopened when its client was replaced (the server was down):
                # try again now, as the kernel client keeps trying to recover.
                try:
                    self._reopen(record)
                except OSError as error:
                    log.info("cannot reopen %s yet: %s", record.path, error)
                    raise FuseOSError(errno.EIO) from None
            io = record.io
            try:
                return getattr(io.client, method)(record.handle, *args)
            except NfsError as error:
                if error.state_lost and attempt == 1:
                    self._fail(io, error)
                    continue
                raise FuseOSError(error.errno or errno.EIO) from None
            except OSError as error:
                raise FuseOSError(error.errno or errno.EIO) from None
        raise AssertionError("unreachable")

    def _renew(self) -> None:
        while not self._stopping.wait(self.link.lease_s / 3):
            with self._mutex:
                ios = list(self._ios)
            # READ carries a stateid: it renews the client's lease.
            for io in ios:
                try:
                    io.client.pread(io.renew_handle, 1, 0)
                except NfsError as error:
                    if error.state_lost:
                        self._fail(io, error)  # recover now, not at the next call
                    log.info("renewal failed: %s", error)
            self.locks.renew()

    def _record(self, fh: int) -> _Open:
        record = self._opens.get(fh)
        if record is None:
            raise FuseOSError(errno.EBADF)
        return record

    @staticmethod
    def _server_path(path: str) -> str:
        return SHARE_DIR + (path if path != "/" else "")

    # --- names and attributes ---------------------------------------------

    def getattr(self, path: str, fi: Any = None) -> dict[str, Any]:
        if fi is not None and fi.fh:
            found = self._call_fh(fi.fh, "fstat")
        else:
            found = self._call("lstat", self._server_path(path))
        return found.as_fuse()

    def access(self, path: str, amode: int) -> int:
        self._call("lstat", self._server_path(path))
        return 0

    def readdir(self, path: str, fh: int) -> list[tuple[str, dict[str, int], int]]:
        directory = self._server_path(path)
        entries = []
        for name, _, mode in self._call("listdir", directory):
            # libnfs 4.0 leaves the entry's inode unset: ask for it (with use_ino
            # the kernel passes it on as d_ino, and 0 reads as a deleted entry).
            target = directory if name == "." else os.path.join(directory, name)
            try:
                inode = self._call("lstat", target).ino if name != ".." else 1
            except FuseOSError:
                continue  # removed since the listing
            entries.append((name, {"st_ino": inode, "st_mode": stat.S_IFMT(mode)}, 0))
        return entries

    def opendir(self, path: str) -> int:
        if not stat.S_ISDIR(self._call("lstat", self._server_path(path)).mode):
            raise FuseOSError(errno.ENOTDIR)
        return 0

    def releasedir(self, path: str, fh: int) -> int:
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        # NFS directory operations are synchronous on the server; this still
        # has to reach it, so it fails on a cut link as the kernel's does.
        self._call("lstat", self._server_path(path))
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        self._call("mkdir", self._server_path(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        self._call("rmdir", self._server_path(path))
        return 0

    def unlink(self, path: str) -> int:
        self._call("unlink", self._server_path(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        self._call("rename", self._server_path(old), self._server_path(new))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        self._call("chmod", self._server_path(path), stat.S_IMODE(mode))
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        return 0  # every host is root on an export without root squash

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        now = time.time_ns()
        atime, mtime = times if times is not None else (now, now)
        self._call("utimes", self._server_path(path), atime, mtime)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        result: dict[str, int] = self._call("statvfs", self._server_path(path))
        return result

    # --- file contents ----------------------------------------------------

    def _open_on(self, path: str, flags: int, mode: int, inode: int | None) -> int:
        """OPEN ``path`` on a client that does not have the file open; a FUSE handle for it."""
        self.link.delay()
        for attempt in (1, 2):
            io = self._io_for(inode)
            try:
                handle = io.client.open(path, flags, mode)
                try:
                    opened = io.client.fstat(handle).ino
                except NfsError:
                    io.client.close(handle)
                    raise
            except NfsError as error:
                self._unreserve(io, inode)
                if error.state_lost and attempt == 1:
                    self._fail(io, error)
                    continue
                raise FuseOSError(error.errno or errno.EIO) from None
            with self._mutex:
                fh = next(self._next_fh)
                self._opens[fh] = _Open(path, flags, opened, io, handle)
                if opened != inode:  # created, or replaced since the lookup
                    io.open_inodes[opened] += 1
                    if inode is not None:
                        io.open_inodes[inode] -= 1
            return fh
        raise AssertionError("unreachable")

    def create(self, path: str, mode: int, fi: Any) -> int:
        # O_EXCL goes to the server as an exclusive OPEN: atomic across hosts.
        server_path = self._server_path(path)
        flags = fi.flags | os.O_CREAT
        try:
            fi.fh = self._open_on(server_path, flags, stat.S_IMODE(mode), None)
        except FuseOSError as error:
            # libnfs 4.0 creates GUARDED even without O_EXCL: a file another
            # host made since the kernel's lookup is opened, as O_CREAT means.
            if error.errno != errno.EEXIST or fi.flags & os.O_EXCL:
                raise
            return self.open(path, fi)
        fi.direct_io = 1  # no page cache: every read and write is an RPC
        return 0

    def open(self, path: str, fi: Any) -> int:
        server_path = self._server_path(path)
        inode = self._call("lstat", server_path).ino
        fi.fh = self._open_on(server_path, fi.flags & _REOPEN_MASK, 0, inode)
        fi.direct_io = 1
        return 0

    def read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
        data: bytes = self._call_fh(fi.fh, "pread", size, offset)
        return data

    def write(self, path: str, data: bytes, offset: int, fi: Any) -> int:
        written: int = self._call_fh(fi.fh, "pwrite", data, offset)
        return written

    def truncate(self, path: str, length: int, fi: Any = None) -> int:
        if fi is not None and fi.fh:
            self._call_fh(fi.fh, "ftruncate", length)
        else:
            self._call("truncate", self._server_path(path), length)
        return 0

    def flush(self, path: str, fi: Any) -> int:
        self._record(fi.fh)
        return 0

    def fsync(self, path: str, datasync: int, fi: Any) -> int:
        self._call_fh(fi.fh, "fsync")  # a COMMIT to the server
        return 0

    def release(self, path: str, fi: Any) -> int:
        with self._mutex:
            record = self._opens.pop(fi.fh, None)
            if record is not None:
                record.io.open_inodes[record.inode] -= 1
        if fi.flock_release:
            self.locks.unlock_owner(fi.lock_owner)
        if record is not None and not record.io.broken:
            try:
                record.io.client.close(record.handle)
            except NfsError as error:  # a close never fails for the caller
                if error.state_lost:
                    self._fail(record.io, error)
                log.info("close of %s failed: %s", record.path, error)
            except OSError as error:
                log.info("close of %s failed: %s", record.path, error)
        return 0

    # --- locks ------------------------------------------------------------

    def lock(self, path: str, fi: Any, cmd: int, lock: Any) -> int:
        request = lock.contents
        if cmd == fcntl.F_GETLK:
            request.l_type = self._test_lock(fi.fh, request.l_type)
            if request.l_type != fcntl.F_UNLCK:
                request.l_whence, request.l_start, request.l_len, request.l_pid = 0, 0, 0, 0
            return 0
        # Whole-file locks only: that is all primacy takes (lockf of the whole
        # file), and byte ranges would need a client per range.
        return self._set_lock(fi.fh, fi.lock_owner, request.l_type, cmd == fcntl.F_SETLKW)

    def flock(self, path: str, fi: Any, op: int) -> int:
        kind = _FLOCK_KINDS[op & ~fcntl.LOCK_NB]
        return self._set_lock(fi.fh, fi.lock_owner, kind, not op & fcntl.LOCK_NB)

    def _set_lock(self, fh: int, owner: int, kind: int, wait: bool) -> int:
        path = self._record(fh).path
        if kind == fcntl.F_UNLCK:
            self.locks.unlock(path, owner)
            return 0
        while not self.locks.lock(path, owner, kind):
            if not wait:
                raise FuseOSError(errno.EAGAIN)
            time.sleep(_LOCK_RETRY_S)
        return 0

    def _test_lock(self, fh: int, kind: int) -> int:
        return self.locks.test(self._record(fh).path, kind)

    def close(self) -> None:
        self._stopping.set()
        self.locks.close()
        with self._mutex:
            ios, self._ios = self._ios, []
        for io in ios:
            io.client.close_context()
