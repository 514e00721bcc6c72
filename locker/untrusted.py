"""Reading small files from the share, which is untrusted input: bounded, and never a trap."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


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
