"""Small files read from the share, which is untrusted input: bounded, and never a trap.

Opening, creating and listing go through ``primacy.store.share_io`` (nothing is
followed out of the share); this adds the bound on what a small file may hold."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from primacy.locker.share_io import open_regular


def read_small_file(path: Path, limit: int, share_root: bool = False) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; OSError for anything else.

    Never follows a symlink and never blocks on a FIFO or a device (they are opened
    non-blocking and refused), so a planted entry cannot hang or redirect a node.
    """
    fd = open_regular(path, share_root)  # relative to its directory, never through a symlink
    try:
        info = os.fstat(fd)
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"{path} is larger than {limit} bytes")
        return os.read(fd, limit + 1)[:limit]
    finally:
        os.close(fd)
