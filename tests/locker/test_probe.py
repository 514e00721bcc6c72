"""The share check behind `primacy run`: missing, not writable, locks that do not exclude."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.locker.probe import ShareUnusable, check_share
from primacy.share.posix_lock import LockMethod


@pytest.mark.parametrize("method", [LockMethod.FLOCK, LockMethod.POSIX])
def test_a_local_directory_is_usable_and_left_clean(share: Path, method: LockMethod) -> None:
    check_share(share, method)
    assert list(share.iterdir()) == []


def test_missing_share_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ShareUnusable, match="does not exist"):
        check_share(tmp_path / "nope", LockMethod.FLOCK)


def test_a_file_is_not_a_share(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ShareUnusable, match="not a directory"):
        check_share(tmp_path / "file", LockMethod.FLOCK)


def _check_as_unprivileged_user(share: Path) -> str:
    """check_share's verdict as uid/gid 65534, in a forked child (root ignores mode bits)."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report the verdict through the pipe, whatever happens
        os.close(reader)
        message = "usable"
        try:
            os.setgid(65534)
            os.setuid(65534)
            check_share(share, LockMethod.FLOCK)
        except ShareUnusable as exc:
            message = str(exc)
        except BaseException as exc:
            message = f"unexpected {exc!r}"
        finally:
            os.write(writer, message.encode())
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        message = pipe.read()
    os.waitpid(pid, 0)
    return message


@pytest.fixture
def public_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="primacy-probe-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


def test_a_share_the_user_cannot_write_is_refused(public_dir: Path) -> None:
    share = public_dir / "readonly"
    share.mkdir(mode=0o755)
    if os.geteuid() == 0:
        assert "not writable" in _check_as_unprivileged_user(share)
        return
    share.chmod(0o555)
    with pytest.raises(ShareUnusable, match="not writable"):
        check_share(share, LockMethod.FLOCK)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to an unprivileged user")
def test_a_share_behind_an_unsearchable_directory_is_refused(public_dir: Path) -> None:
    closed = public_dir / "closed"
    closed.mkdir(mode=0o700)
    (closed / "share").mkdir()
    assert "cannot be reached" in _check_as_unprivileged_user(closed / "share")


def test_locks_that_do_not_exclude_are_refused(fs: object) -> None:
    # pyfakefs stands in for a filesystem whose locks are no-ops (an NFS mount
    # with local_lock on another host would look like this): its fcntl does nothing.
    os.makedirs("/share")
    with pytest.raises(ShareUnusable, match="do not exclude"):
        check_share(Path("/share"), LockMethod.FLOCK)
