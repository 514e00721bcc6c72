"""A ctypes binding of the few libnfs (Debian's libnfs13) calls the real-NFS tier needs.

One ``NfsClient`` is one libnfs context, and so one NFSv4 client on the server:
its own client id, its own lease, its own lock owner (libnfs names every lock
owner of a context after the context's client name). libnfs contexts are not
thread safe; ``NfsClient`` serialises every call with one mutex, which is also
what a real client does on a dead link: everything behind the stuck call waits.

Errors come back as ``OSError`` with the errno libnfs maps the NFS status to
(``NFS4ERR_DENIED`` -> EAGAIN, ``NFS4ERR_EXPIRED`` -> EIO/EINVAL...), and the
libnfs message in the text.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass

_lib = ctypes.CDLL("libnfs.so.13", use_errno=True)

NFS_V4 = 4
# nfs4_fcntl_op
_F_SETLK = 0
# "To end of file": NFSv4 refuses a LOCK of length 0 with NFS4ERR_INVAL.
TO_END_OF_FILE = 2**64 - 1
_WRITE_CHUNK = 2048


class _Stat64(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in [
            "dev",
            "ino",
            "mode",
            "nlink",
            "uid",
            "gid",
            "rdev",
            "size",
            "blksize",
            "blocks",
            "atime",
            "mtime",
            "ctime",
            "atime_nsec",
            "mtime_nsec",
            "ctime_nsec",
            "used",
        ]
    ]


class _Timeval(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("usec", ctypes.c_long)]


class _Dirent(ctypes.Structure):
    pass


_Dirent._fields_ = [
    ("next", ctypes.POINTER(_Dirent)),
    ("name", ctypes.c_char_p),
    ("inode", ctypes.c_uint64),
    ("type", ctypes.c_uint32),
    ("mode", ctypes.c_uint32),
]


class _Flock(ctypes.Structure):
    _fields_ = [
        ("l_type", ctypes.c_int),
        ("l_whence", ctypes.c_int),
        ("l_pid", ctypes.c_uint32),
        ("l_start", ctypes.c_uint64),
        ("l_len", ctypes.c_uint64),
    ]


class _StatVfs64(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in [
            "bsize",
            "frsize",
            "blocks",
            "bfree",
            "bavail",
            "files",
            "ffree",
            "favail",
            "fsid",
            "flag",
            "namemax",
        ]
    ]


_ctx = ctypes.c_void_p
_fh = ctypes.c_void_p
_P = ctypes.POINTER


def _sig(name: str, restype: object, *argtypes: object) -> None:
    function = getattr(_lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)


_sig("nfs_init_context", _ctx)
_sig("nfs_destroy_context", None, _ctx)
_sig("nfs_get_error", ctypes.c_char_p, _ctx)
_sig("nfs_set_version", ctypes.c_int, _ctx, ctypes.c_int)
_sig("nfs_set_timeout", None, _ctx, ctypes.c_int)
_sig("nfs_set_autoreconnect", None, _ctx, ctypes.c_int)
_sig("nfs4_set_client_name", None, _ctx, ctypes.c_char_p)
_sig("nfs_mount", ctypes.c_int, _ctx, ctypes.c_char_p, ctypes.c_char_p)
_sig("nfs_umount", ctypes.c_int, _ctx)
_sig("nfs_lstat64", ctypes.c_int, _ctx, ctypes.c_char_p, _P(_Stat64))
_sig("nfs_fstat64", ctypes.c_int, _ctx, _fh, _P(_Stat64))
_sig("nfs_statvfs64", ctypes.c_int, _ctx, ctypes.c_char_p, _P(_StatVfs64))
_sig("nfs_open", ctypes.c_int, _ctx, ctypes.c_char_p, ctypes.c_int, _P(_fh))
_sig("nfs_open2", ctypes.c_int, _ctx, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, _P(_fh))
_sig("nfs_close", ctypes.c_int, _ctx, _fh)
_sig("nfs_pread", ctypes.c_int, _ctx, _fh, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p)
_sig("nfs_pwrite", ctypes.c_int, _ctx, _fh, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p)
_sig("nfs_fsync", ctypes.c_int, _ctx, _fh)
_sig("nfs_ftruncate", ctypes.c_int, _ctx, _fh, ctypes.c_uint64)
_sig("nfs_truncate", ctypes.c_int, _ctx, ctypes.c_char_p, ctypes.c_uint64)
_sig("nfs_mkdir2", ctypes.c_int, _ctx, ctypes.c_char_p, ctypes.c_int)
_sig("nfs_rmdir", ctypes.c_int, _ctx, ctypes.c_char_p)
_sig("nfs_unlink", ctypes.c_int, _ctx, ctypes.c_char_p)
_sig("nfs_rename", ctypes.c_int, _ctx, ctypes.c_char_p, ctypes.c_char_p)
_sig("nfs_chmod", ctypes.c_int, _ctx, ctypes.c_char_p, ctypes.c_int)
_sig("nfs_utimes", ctypes.c_int, _ctx, ctypes.c_char_p, _P(_Timeval))
_sig("nfs_opendir", ctypes.c_int, _ctx, ctypes.c_char_p, _P(ctypes.c_void_p))
_sig("nfs_readdir", _P(_Dirent), _ctx, ctypes.c_void_p)
_sig("nfs_closedir", None, _ctx, ctypes.c_void_p)
_sig("nfs_fcntl", ctypes.c_int, _ctx, _fh, ctypes.c_int, ctypes.c_void_p)


# libnfs 4.0 maps most NFSv4 statuses to ERANGE; the status name is in its message.
_NFS4_ERRNO = {
    "NFS4ERR_DENIED": errno.EAGAIN,
    "NFS4ERR_EXIST": errno.EEXIST,
    "NFS4ERR_NOENT": errno.ENOENT,
    "NFS4ERR_NOTDIR": errno.ENOTDIR,
    "NFS4ERR_ISDIR": errno.EISDIR,
    "NFS4ERR_NOTEMPTY": errno.ENOTEMPTY,
    "NFS4ERR_ACCESS": errno.EACCES,
    "NFS4ERR_PERM": errno.EPERM,
    "NFS4ERR_NOSPC": errno.ENOSPC,
    "NFS4ERR_SYMLINK": errno.ELOOP,
    "NFS4ERR_INVAL": errno.EINVAL,
    "NFS4ERR_NAMETOOLONG": errno.ENAMETOOLONG,
}
# Statuses that say this client's state on the server is gone: its lease
# expired, or the server restarted (and the grace period, if any, is over).
LOST_STATE = (
    "NFS4ERR_EXPIRED",
    "NFS4ERR_STALE_CLIENTID",
    "NFS4ERR_STALE_STATEID",
    "NFS4ERR_BAD_STATEID",
    "NFS4ERR_BAD_SEQID",
    "NFS4ERR_OLD_STATEID",
    "NFS4ERR_ADMIN_REVOKED",
    "NFS4ERR_NO_GRACE",
    "NFS4ERR_RECLAIM_BAD",
)


class NfsError(OSError):
    """An NFS call failed; ``status`` is the NFSv4 status name when the server sent one."""

    def __init__(self, code: int, text: str, message: str) -> None:
        super().__init__(code, text)
        found = re.search(r"NFS4ERR_[A-Z_]+", message)
        self.status = found.group(0) if found else None
        # libnfs 4.0 never reconnects: once the server closed the connection
        # (it restarted), every call of the context fails like this.
        self.disconnected = "nfs_service failed" in message

    @property
    def state_lost(self) -> bool:
        """This client is of no more use: a fresh one (a new NFSv4 client id) is needed."""
        return self.status in LOST_STATE or self.disconnected


def _errno_of(code: int, message: str) -> int:
    found = re.search(r"NFS4ERR_[A-Z_]+", message)
    if found:
        return _NFS4_ERRNO.get(found.group(0), errno.EIO)
    if code in (errno.EINTR, errno.EFAULT, errno.ERANGE):
        return errno.EIO  # a timeout or a dead connection, as a soft mount reports it
    return code


@dataclass(frozen=True)
class Stat:
    mode: int
    ino: int
    nlink: int
    uid: int
    gid: int
    size: int
    blocks: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int

    def as_fuse(self) -> dict[str, int]:
        """The attributes as a FUSE getattr answers them (times in nanoseconds)."""
        return {
            "st_mode": self.mode,
            "st_ino": self.ino,
            "st_nlink": self.nlink,
            "st_uid": self.uid,
            "st_gid": self.gid,
            "st_size": self.size,
            "st_blocks": self.blocks,
            "st_atime": self.atime_ns,
            "st_mtime": self.mtime_ns,
            "st_ctime": self.ctime_ns,
        }


def _stat(raw: _Stat64) -> Stat:
    return Stat(
        mode=raw.mode,
        ino=raw.ino,
        nlink=raw.nlink,
        uid=raw.uid,
        gid=raw.gid,
        size=raw.size,
        blocks=raw.blocks,
        atime_ns=raw.atime * 10**9 + raw.atime_nsec,
        mtime_ns=raw.mtime * 10**9 + raw.mtime_nsec,
        ctime_ns=raw.ctime * 10**9 + raw.ctime_nsec,
    )


class NfsClient:
    """One NFSv4 client (a libnfs context) mounted on ``server:export``."""

    def __init__(self, server: str, export: str, client_name: str, timeout_ms: int) -> None:
        self._mutex = threading.Lock()
        self._ctx = _lib.nfs_init_context()
        if not self._ctx:
            raise OSError(errno.ENOMEM, "nfs_init_context failed")
        _lib.nfs_set_version(self._ctx, NFS_V4)
        # The client name is the NFSv4 client identity (and its lock owner):
        # one per emulated host, stable across a reconnect as a real host's is.
        _lib.nfs4_set_client_name(self._ctx, client_name.encode())
        # A soft mount: a call the server does not answer fails after the
        # timeout (EIO to the caller), as soft,timeo= does in the kernel client.
        _lib.nfs_set_timeout(self._ctx, timeout_ms)
        self._check(_lib.nfs_mount(self._ctx, server.encode(), export.encode()), "mount")

    @contextlib.contextmanager
    def _live(self) -> Iterator[None]:
        """Hold the mutex over one call; a closed client fails (libnfs would crash on it)."""
        with self._mutex:
            if not self._ctx:
                # Another thread threw this client away (its state was lost) while
                # this one held it: fail like a dead connection, so it recovers.
                raise NfsError(errno.EIO, "closed", "nfs_service failed: the client was closed")
            yield

    def _check(self, result: int, what: str) -> int:
        if result < 0:
            message = (_lib.nfs_get_error(self._ctx) or b"").decode(errors="replace")
            raise NfsError(_errno_of(-result, message), f"{what}: {message}", message)
        return result

    def lstat(self, path: str) -> Stat:
        raw = _Stat64()
        with self._live():
            self._check(_lib.nfs_lstat64(self._ctx, path.encode(), ctypes.byref(raw)), "lstat")
        return _stat(raw)

    def fstat(self, handle: int) -> Stat:
        raw = _Stat64()
        with self._live():
            self._check(_lib.nfs_fstat64(self._ctx, handle, ctypes.byref(raw)), "fstat")
        return _stat(raw)

    def statvfs(self, path: str) -> dict[str, int]:
        raw = _StatVfs64()
        with self._live():
            self._check(_lib.nfs_statvfs64(self._ctx, path.encode(), ctypes.byref(raw)), "statvfs")
        return {
            "f_bsize": raw.bsize,
            "f_frsize": raw.frsize,
            "f_blocks": raw.blocks,
            "f_bfree": raw.bfree,
            "f_bavail": raw.bavail,
            "f_files": raw.files,
            "f_ffree": raw.ffree,
            "f_favail": raw.favail,
            "f_namemax": raw.namemax or 255,
        }

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        handle = ctypes.c_void_p()
        with self._live():
            if flags & os.O_CREAT:
                result = _lib.nfs_open2(self._ctx, path.encode(), flags, mode, ctypes.byref(handle))
            else:
                result = _lib.nfs_open(self._ctx, path.encode(), flags, ctypes.byref(handle))
            self._check(result, f"open {path}")
        assert handle.value is not None
        return handle.value

    def close(self, handle: int) -> None:
        with self._live():
            self._check(_lib.nfs_close(self._ctx, handle), "close")

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        buffer = ctypes.create_string_buffer(size)
        with self._live():
            count = self._check(_lib.nfs_pread(self._ctx, handle, offset, size, buffer), "read")
        return buffer.raw[:count]

    def pwrite(self, handle: int, data: bytes, offset: int) -> int:
        # libnfs 4.0 cannot encode a WRITE of about 4000 bytes or more ("Failed to
        # encode COMPOUND4args"): send at most _WRITE_CHUNK per WRITE, as a small wsize.
        written = 0
        with self._live():
            while written < len(data):
                chunk = data[written : written + _WRITE_CHUNK]
                count = self._check(
                    _lib.nfs_pwrite(self._ctx, handle, offset + written, len(chunk), chunk),
                    "write",
                )
                if count == 0:
                    break
                written += count
        return written

    def fsync(self, handle: int) -> None:
        with self._live():
            self._check(_lib.nfs_fsync(self._ctx, handle), "fsync")

    def ftruncate(self, handle: int, length: int) -> None:
        with self._live():
            self._check(_lib.nfs_ftruncate(self._ctx, handle, length), "ftruncate")

    def truncate(self, path: str, length: int) -> None:
        with self._live():
            self._check(_lib.nfs_truncate(self._ctx, path.encode(), length), "truncate")

    def mkdir(self, path: str, mode: int) -> None:
        with self._live():
            self._check(_lib.nfs_mkdir2(self._ctx, path.encode(), mode), f"mkdir {path}")

    def rmdir(self, path: str) -> None:
        with self._live():
            self._check(_lib.nfs_rmdir(self._ctx, path.encode()), f"rmdir {path}")

    def unlink(self, path: str) -> None:
        with self._live():
            self._check(_lib.nfs_unlink(self._ctx, path.encode()), f"unlink {path}")

    def rename(self, old: str, new: str) -> None:
        with self._live():
            self._check(_lib.nfs_rename(self._ctx, old.encode(), new.encode()), "rename")

    def chmod(self, path: str, mode: int) -> None:
        with self._live():
            self._check(_lib.nfs_chmod(self._ctx, path.encode(), mode), "chmod")

    def utimes(self, path: str, atime_ns: int, mtime_ns: int) -> None:
        times = (_Timeval * 2)(
            _Timeval(atime_ns // 10**9, atime_ns % 10**9 // 1000),
            _Timeval(mtime_ns // 10**9, mtime_ns % 10**9 // 1000),
        )
        with self._live():
            self._check(_lib.nfs_utimes(self._ctx, path.encode(), times), "utimes")

    def listdir(self, path: str) -> list[tuple[str, int, int]]:
        """(name, inode, mode type bits) of each entry, "." and ".." included."""
        directory = ctypes.c_void_p()
        entries = []
        with self._live():
            self._check(
                _lib.nfs_opendir(self._ctx, path.encode(), ctypes.byref(directory)), "opendir"
            )
            try:
                while entry := _lib.nfs_readdir(self._ctx, directory):
                    item = entry.contents
                    entries.append((item.name.decode(), item.inode, item.mode))
            finally:
                _lib.nfs_closedir(self._ctx, directory)
        return entries

    def set_lock(self, handle: int, kind: int, start: int, length: int) -> None:
        """One non-blocking LOCK or LOCKU; EAGAIN when another client holds a conflicting lock."""
        request = _Flock(kind, os.SEEK_SET, 0, start, length or TO_END_OF_FILE)
        with self._live():
            self._check(_lib.nfs_fcntl(self._ctx, handle, _F_SETLK, ctypes.byref(request)), "lock")

    def close_context(self) -> None:
        with self._mutex:
            if self._ctx:
                _lib.nfs_destroy_context(self._ctx)
                self._ctx = None
