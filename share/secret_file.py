"""One check for the operator's files that hold a secret or decide who gets in.

The admin token, the STOMP users file, and the TLS certificate, key and CA file
are all judged here, the same way:

- a regular file of its own: the last name is opened ``O_NOFOLLOW`` and
  non-blocking, so a symlink is refused (point the setting at the file itself),
  and a FIFO, a directory or a device is refused after one ``fstat`` without a
  single read, never waited on. Directories above it are the operator's and
  may be reached through symlinks;
- owned by root or by the user the node runs as: a file another account owns
  is that account's to rewrite;
- writable by nobody but its owner (whoever can write the users file or a
  certificate can let themselves in or stand in for the node);
- if ``private`` (a key, a token, a password), no permission at all for the
  group or others. Group read is refused too: the two private files checked
  before this module (the admin token and the TLS key) both refused it, and a
  key shared with a group (Debian's ``ssl-cert``, mode 0640) is copied for the
  node instead.

Every refusal is one ``SecretFileError`` sentence naming the file, what is
wrong and the exact ``chmod``/``chown`` that fixes it; nothing read from the
file ever appears in it. ``read_secret_file`` checks and reads through one
descriptor, so the bytes read are those of the file checked.
"""

from __future__ import annotations

import errno
import os
import pwd
import shlex
import stat
from pathlib import Path

from primacy.share.safe_io import directory_fd

MAX_SECRET_BYTES = 64 * 1024

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class SecretFileError(ValueError):
    """A secret file cannot be used; one sentence: which file, what is wrong, the fix."""


def check_secret_file(path: Path, what: str, *, private: bool) -> os.stat_result:
    """The status of ``path`` if it passes the module's check; SecretFileError if not.

    ``what`` names the file for the operator ("admin token file", "TLS key").
    """
    fd = _open(Path(path), what)
    try:
        return _judge(os.fstat(fd), Path(path), what, private)
    finally:
        os.close(fd)


def read_secret_file(
    path: Path, what: str, *, max_bytes: int = MAX_SECRET_BYTES, private: bool = True
) -> bytes:
    """The bytes of ``path``, checked as ``check_secret_file`` does (``private`` unless told)
    and read through the descriptor checked; SecretFileError past ``max_bytes``."""
    path = Path(path)
    fd = _open(path, what)
    try:
        info = _judge(os.fstat(fd), path, what, private)
        if info.st_size > max_bytes:
            raise SecretFileError(f"the {what} {path} is larger than {max_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:  # grew since the fstat
            raise SecretFileError(f"the {what} {path} is larger than {max_bytes} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise SecretFileError(f"cannot read the {what} {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def _open(path: Path, what: str) -> int:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        # The directory is the operator's: followed if a symlink; the file's own name never is.
        with directory_fd(path.parent, share_root=True) as directory:
            return os.open(path.name, flags, dir_fd=directory)
    except FileNotFoundError:
        raise SecretFileError(f"the {what} {path} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SecretFileError(
                f"the {what} {path} is a symbolic link, which is never followed: point the "
                f"setting at the file itself ({shlex.quote(os.path.realpath(path))})"
            ) from None
        raise SecretFileError(f"cannot read the {what} {path}: {exc.strerror}") from None


def _judge(info: os.stat_result, path: Path, what: str, private: bool) -> os.stat_result:
    quoted = shlex.quote(str(path))
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise SecretFileError(
            f"the {what} {path} is {kind}, not a regular file: put the {what} in a plain file"
        )
    user = os.geteuid()
    if info.st_uid not in (0, user):
        raise SecretFileError(
            f"the {what} {path} belongs to uid {info.st_uid}, not to root or to the user this "
            f"node runs as, who alone may be trusted to write it: chown {_user_name(user)} "
            f"{quoted}"
        )
    mode = stat.S_IMODE(info.st_mode)
    if private and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecretFileError(
            f"the {what} {path} is open to others (mode {mode:04o}): only its owner may read "
            f"it; chmod 600 {quoted}"
        )
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SecretFileError(
            f"the {what} {path} is writable by others (mode {mode:04o}): only its owner may "
            f"write it; chmod go-w {quoted}"
        )
    return info


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
