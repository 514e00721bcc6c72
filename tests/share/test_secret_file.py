"""The one secret-file check, on real files with real modes, owners, symlinks and FIFOs."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from primacy.share.secret_file import SecretFileError, check_secret_file, read_secret_file

SECRET = b"s3cr3t-t0ken-never-shown"
ANOTHER_UID = 4242


def _file(tmp_path: Path, mode: int, content: bytes = SECRET, name: str = "secret") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    os.chmod(path, mode)
    return path


def _finishes(work: object, timeout_s: float = 5.0) -> bool:
    """Whether ``work`` returns (or raises) within the bound: a FIFO must never hang a check."""
    assert callable(work)
    runner = threading.Thread(target=work, daemon=True)
    runner.start()
    runner.join(timeout_s)
    return not runner.is_alive()


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o700])
def test_a_private_file_only_its_owner_can_use_is_read(tmp_path: Path, mode: int) -> None:
    path = _file(tmp_path, mode)
    assert read_secret_file(path, "admin token file") == SECRET
    assert check_secret_file(path, "TLS key", private=True).st_size == len(SECRET)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o610, 0o660, 0o644])
def test_a_private_file_open_to_others_is_refused_with_the_chmod(tmp_path: Path, mode: int) -> None:
    path = _file(tmp_path, mode)
    for attempt in (
        lambda: check_secret_file(path, "TLS key", private=True),
        lambda: read_secret_file(path, "TLS key"),
    ):
        with pytest.raises(SecretFileError) as caught:
            attempt()
        message = str(caught.value)
        assert f"mode {mode:04o}" in message and f"chmod 600 {path}" in message
        assert "the TLS key" in message and SECRET.decode() not in message


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o444])
def test_a_public_file_only_its_owner_can_write_passes(tmp_path: Path, mode: int) -> None:
    assert check_secret_file(_file(tmp_path, mode), "users file", private=False)
    assert read_secret_file(_file(tmp_path, mode), "users file", private=False) == SECRET


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666, 0o622])
def test_a_file_others_can_write_is_refused_with_the_chmod(tmp_path: Path, mode: int) -> None:
    path = _file(tmp_path, mode)
    with pytest.raises(SecretFileError, match=rf"writable by others.*chmod go-w {path}$"):
        check_secret_file(path, "users file", private=False)


def test_the_chmod_quotes_a_path_a_shell_would_split(tmp_path: Path) -> None:
    path = _file(tmp_path, 0o666, name="my users")
    with pytest.raises(SecretFileError, match="chmod go-w '"):
        check_secret_file(path, "users file", private=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away takes root")
@pytest.mark.parametrize("private", [True, False])
def test_a_file_another_user_owns_is_refused_with_the_chown(tmp_path: Path, private: bool) -> None:
    path = _file(tmp_path, 0o600)
    os.chown(path, ANOTHER_UID, -1)
    with pytest.raises(SecretFileError) as caught:
        check_secret_file(path, "users file", private=private)
    message = str(caught.value)
    assert f"uid {ANOTHER_UID}" in message and f"chown root {path}" in message


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away takes root")
def test_a_file_root_owns_passes_whoever_the_group_is(tmp_path: Path) -> None:
    path = _file(tmp_path, 0o600)
    os.chown(path, 0, ANOTHER_UID)
    assert read_secret_file(path, "admin token file") == SECRET


def test_a_symlink_to_a_good_file_is_refused_and_the_target_named(tmp_path: Path) -> None:
    target = _file(tmp_path, 0o600)
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(SecretFileError, match="symbolic link") as caught:
        read_secret_file(link, "admin token file")
    assert str(target) in str(caught.value) and SECRET.decode() not in str(caught.value)


def test_a_symlinked_directory_above_the_file_is_the_operators_and_followed(
    tmp_path: Path,
) -> None:
    (tmp_path / "real").mkdir()
    _file(tmp_path / "real", 0o600)
    (tmp_path / "etc").symlink_to(tmp_path / "real")
    assert read_secret_file(tmp_path / "etc" / "secret", "TLS key") == SECRET


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            read_secret_file(fifo, "admin token file")
        except SecretFileError as exc:
            outcome.append(exc)

    assert _finishes(attempt)
    assert outcome and "is a FIFO, not a regular file" in str(outcome[0])


def test_a_fifo_fed_a_secret_is_refused_all_the_same(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    writer = os.open(fifo, os.O_RDWR)  # a writer that never leaves: a plain read would hang
    try:
        os.write(writer, SECRET)
        with pytest.raises(SecretFileError, match="FIFO") as caught:
            check_secret_file(fifo, "admin token file", private=True)
        assert SECRET.decode() not in str(caught.value)
    finally:
        os.close(writer)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir(mode=0o700)
    with pytest.raises(SecretFileError, match="is a directory, not a regular file"):
        check_secret_file(tmp_path / "dir", "users file", private=False)


def test_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SecretFileError, match="character device"):
        check_secret_file(Path("/dev/null"), "users file", private=False)


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(SecretFileError, match="does not exist"):
        read_secret_file(tmp_path / "nothing", "admin token file")
    with pytest.raises(SecretFileError, match="does not exist"):
        check_secret_file(tmp_path / "nowhere" / "secret", "TLS key", private=True)


def test_reads_are_bounded(tmp_path: Path) -> None:
    path = _file(tmp_path, 0o600, content=b"x" * 101)
    with pytest.raises(SecretFileError, match="larger than 100 bytes"):
        read_secret_file(path, "admin token file", max_bytes=100)
    assert read_secret_file(path, "admin token file", max_bytes=101) == b"x" * 101


def test_the_error_is_a_value_error() -> None:
    assert issubclass(SecretFileError, ValueError)
