"""Files and directories on the share, which is untrusted input: reads bounded, never a trap;
names written never followed out of the share."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path


def real_directory(path: Path) -> Path:
    """``path``, created if missing, as a directory of its own; OSError if a symlink (or any
    other kind of file) has its name: following it would read and write outside the share."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o755)
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        raise OSError(
            errno.ENOTDIR,
            f"{path} is not a directory of its own (a symlink or a file has its name)",
        )
    return path


def create_new_file(path: Path, flags: int = os.O_WRONLY, mode: int = 0o644) -> int:
    """A descriptor of a new, empty file at ``path``, whatever was planted under that name
    (a symlink out of the share is removed, never followed): for names only we write."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def read_small_file(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; OSError for anything else.

    Never follows a symlink and never blocks on a FIFO or a device (they are opened
    non-blocking and refused), so a planted entry cannot hang or redirect a node.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"{path} is larger than {limit} bytes")
        return os.read(fd, limit + 1)[:limit]
    finally:
        os.close(fd)
