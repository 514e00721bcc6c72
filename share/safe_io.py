"""Files and directories on the share, which is untrusted input: nothing is followed out of it.

The one module through which primacy touches files on the share (the lock file
excepted: ``share/posix_lock.py`` holds it through exactly one descriptor).

Every file in a directory primacy keeps (``share/layout.py``) is opened, listed,
created, renamed and removed relative to a descriptor of that directory, and the
directory itself is opened without following a symlink (``O_DIRECTORY |
O_NOFOLLOW``). So a directory swapped for a symlink, before a node starts or at
any moment while it runs, is refused with the reason, never followed. Files are
opened ``O_NOFOLLOW`` and non-blocking and must be regular files (a FIFO or a
device would hang the reader); reads are bounded; a name primacy writes is
created ``O_EXCL`` after removing whatever was planted there.

The share's own directory is the operator's path and may be a symlink (a mount
reached through ``/srv/share``, say): files directly in it (the lock file and the
group's markers) pass ``share_root=True`` to follow it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from primacy.share.layout import DIRECTORY_MODE, FILE_MODE

# A JSON file of ours is a flat record of a few hundred bytes.
MAX_JSON_BYTES = 64 * 1024


@contextlib.contextmanager
def directory_fd(directory: Path, share_root: bool = False) -> Iterator[int]:
    """A descriptor of ``directory``: OSError if a symlink (or a file) has its name."""
    fd = _open_directory(directory, share_root)
    try:
        yield fd
    finally:
        os.close(fd)


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _open_directory(directory: Path | str, share_root: bool = False) -> int:
    """``directory_fd``'s descriptor, for the caller to close."""
    flags = _DIRECTORY_FLAGS if share_root else _DIRECTORY_FLAGS | os.O_NOFOLLOW
    try:
        return os.open(directory, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OSError(
                errno.ENOTDIR,
                f"{directory} is not a directory of its own (a symlink or a file has its name)",
            ) from None
        raise


def real_directory(path: Path) -> Path:
    """``path``, created if missing, as a directory of its own (see ``directory_fd``)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, DIRECTORY_MODE)
    with directory_fd(path):
        return path


def open_regular(path: Path, share_root: bool = False) -> int:
    """A read-only descriptor of the regular file ``path``; OSError for anything else."""
    with directory_fd(path.parent, share_root) as directory:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(path.name, flags, dir_fd=directory)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{path} is not a regular file")
    return fd


def create_new_file(
    path: Path, flags: int = os.O_WRONLY, mode: int = FILE_MODE, share_root: bool = False
) -> int:
    """A descriptor of a new, empty file at ``path``, whatever was planted under that name
    (a symlink out of the share is removed, never followed): for names only we write."""
    with directory_fd(path.parent, share_root) as directory:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=directory)
        flags |= os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(path.name, flags, mode, dir_fd=directory)


def create_exclusive(
    path: Path, flags: int = os.O_WRONLY, mode: int = FILE_MODE, share_root: bool = False
) -> int:
    """A descriptor of a file created at ``path`` for writing; FileExistsError if the name is
    taken by anything at all (how an epoch or a segment is created: nothing is removed)."""
    with directory_fd(path.parent, share_root) as directory:
        flags |= os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(path.name, flags, mode, dir_fd=directory)


def names_in(directory: Path) -> list[str]:
    """Every name in ``directory`` ([] if it does not exist)."""
    try:
        with directory_fd(directory) as fd:
            return os.listdir(fd)
    except FileNotFoundError:
        return []


def regular_files_in(directory: Path) -> list[str]:
    """The names in ``directory`` that are regular files (not symlinks, FIFOs, devices)."""
    try:
        with directory_fd(directory) as fd:
            return [name for name in os.listdir(fd) if _is_regular_at(fd, name)]
    except FileNotFoundError:
        return []


def exists_in(path: Path) -> bool:
    """Whether anything has the name ``path`` (a symlink counts, unfollowed)."""
    return name_exists(path.parent, path.name)


def name_exists(directory: Path | str, name: str) -> bool:
    """Whether anything has ``name`` in ``directory`` (a symlink counts, unfollowed).

    The form for a check made at every commit (the lease's): no path is built, and no
    context manager (a generator and three interpreted calls, at every commit).
    """
    try:
        fd = _open_directory(directory)
    except FileNotFoundError:
        return False
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    finally:
        os.close(fd)
    return True


def replace_within(source: Path, target: Path, share_root: bool = False) -> None:
    """Rename ``source`` over ``target``, both in one directory."""
    with directory_fd(target.parent, share_root) as directory:
        os.replace(source.name, target.name, src_dir_fd=directory, dst_dir_fd=directory)


def move_into(source: Path, directory: Path, name: str) -> os.stat_result:
    """Rename ``source`` to ``directory/name`` (both directories opened unfollowed; the name
    must be free) and return what the new name refers to, unfollowed: the caller checks it
    is the file it meant to move. FileExistsError if the name is taken."""
    with directory_fd(source.parent) as from_fd, directory_fd(directory) as to_fd:
        if _exists_at(to_fd, name):
            raise FileExistsError(errno.EEXIST, f"{directory / name} exists")
        os.rename(source.name, name, src_dir_fd=from_fd, dst_dir_fd=to_fd)
        os.fsync(from_fd)
        os.fsync(to_fd)
        return os.stat(name, dir_fd=to_fd, follow_symlinks=False)


def _exists_at(directory: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def remove(path: Path, share_root: bool = False) -> None:
    """Remove the name ``path`` if it exists (a symlink is removed, not its target)."""
    with contextlib.suppress(FileNotFoundError), directory_fd(path.parent, share_root) as fd:
        os.unlink(path.name, dir_fd=fd)


def fsync_directory(directory: Path, share_root: bool = False) -> None:
    """Make the names created or renamed in ``directory`` durable."""
    with directory_fd(directory, share_root) as fd:
        os.fsync(fd)


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


def write_json_atomically(
    path: Path, content: dict[str, Any], *, durable: bool, share_root: bool = False
) -> None:
    """Replace ``path`` with ``content``; readers see the old or the new file, never a part.

    The temp name is per process and thread, since two threads may write the same
    file. ``durable`` also fsyncs the file and the directory, for state that must
    survive a crash (not for entries rewritten every second anyway). ``share_root``:
    ``path`` is directly in the share, whose directory may be reached by a symlink.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    # A predictable name: whatever is planted there goes.
    fd = create_new_file(temporary, share_root=share_root)
    with open(fd, "w") as handle:
        handle.write(json.dumps(content, sort_keys=True) + "\n")
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    replace_within(temporary, path, share_root)
    if durable:
        fsync_directory(path.parent, share_root)


def read_json(path: Path, share_root: bool = False, limit: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """A JSON object from the share; OSError or ValueError for anything else or anything odd."""
    try:
        value = json.loads(read_small_file(path, limit, share_root).decode())
    except RecursionError as exc:  # "[[[[..." passes the size bound
        raise ValueError(f"{path} nests too deeply") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return value


def _is_regular_at(directory: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False
