"""Checks that a share can carry the lock at all: exists, writable, locks really exclude."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
from pathlib import Path

from primacy.share.posix_lock import LockMethod
from primacy.share.safe_io import create_new_file, remove


class ShareUnusable(Exception):
    """The share cannot hold a primacy lock; the message says why and what to do."""


def check_share(share: Path, method: LockMethod) -> None:
    """Raise ShareUnusable unless ``share`` is a writable directory whose locks exclude.

    The lock test uses a probe file, never the lock file itself, and two open
    file descriptions of it: the second must be refused while the first holds
    the lock. ``posix`` is probed with open-file-description locks, which go
    through the same filesystem lock operations as ``lockf``.
    """
    share = Path(share)
    try:
        exists, is_dir = share.exists(), share.is_dir()
    except PermissionError:
        raise ShareUnusable(
            f"the share {share} cannot be reached by this user (uid {os.getuid()}): "
            "a directory on its path is not searchable"
        ) from None
    if not exists:
        raise ShareUnusable(f"the share {share} does not exist; mount it or create the directory")
    if not is_dir:
        raise ShareUnusable(f"the share {share} is not a directory")
    probe = share / f".primacy-probe-{os.uname().nodename}-{os.getpid()}"
    try:
        # A planted symlink at the name is removed, never followed.
        first = create_new_file(probe, os.O_RDWR, 0o600, share_root=True)
    except PermissionError:
        raise ShareUnusable(
            f"the share {share} is not writable by this user (uid {os.getuid()}); "
            "fix its ownership or run primacy as the share's owner"
        ) from None
    except OSError as exc:
        raise ShareUnusable(f"cannot create a file in the share {share}: {exc.strerror}") from exc
    second = -1
    try:
        second = os.open(probe, os.O_RDWR | os.O_NOFOLLOW)
        _probe_exclusion(first, second, method, share)
    finally:
        for fd in (first, second):
            if fd >= 0:
                os.close(fd)
        with contextlib.suppress(OSError):
            remove(probe, share_root=True)


def _probe_exclusion(first: int, second: int, method: LockMethod, share: Path) -> None:
    try:
        _lock(first, method)
    except OSError as exc:
        raise ShareUnusable(
            f"the share {share} does not support {method} locks ({exc.strerror}); "
            "on NFS remove 'nolock'/'local_lock', or pick the other lock method"
        ) from exc
    try:
        _lock(second, method)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return
        raise ShareUnusable(f"locking on the share {share} fails: {exc.strerror}") from exc
    raise ShareUnusable(
        f"{method} locks on the share {share} do not exclude each other; "
        "this filesystem cannot elect a single master"
    )


def _lock(fd: int, method: LockMethod) -> None:
    if method is LockMethod.FLOCK:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks)
    request = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, request)
