"""The users file and the TLS files pass the one secret-file check (issue 42, item 6).

Before ``share/secret_file.py``: the users file's owner was never looked at (a file another
account owns is that account's to rewrite with a user of its own), and a symlink passed the
users file and TLS checks alike (``os.stat`` follows it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from primacy.broker.tls import TlsFilesError, check_tls_files
from primacy.broker.users import (
    User,
    UsersFileError,
    check_ownership,
    hash_password,
    load_users,
    save_users,
)

ANOTHER_UID = 4242
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away takes root")


@pytest.fixture(scope="module")
def users_json(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("users") / "users.json"
    save_users(path, {"alice": User("alice", hash_password("alices password"))})
    return path.read_bytes()


def _users_file(tmp_path: Path, content: bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "users.json"
    path.write_bytes(content)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644])
def test_a_users_file_only_its_owner_can_write_is_read(
    tmp_path: Path, users_json: bytes, mode: int
) -> None:
    assert list(load_users(_users_file(tmp_path, users_json, mode))) == ["alice"]


@as_root
@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_a_users_file_another_user_owns_is_refused_with_the_chown(
    tmp_path: Path, users_json: bytes, mode: int
) -> None:
    path = _users_file(tmp_path, users_json, mode)
    os.chown(path, ANOTHER_UID, -1)
    for attempt in (load_users, check_ownership):
        with pytest.raises(UsersFileError, match=f"uid {ANOTHER_UID}.*chown root {path}$") as err:
            attempt(path)
        assert "argon2" not in str(err.value)


def test_a_symlink_to_a_good_users_file_is_refused(tmp_path: Path, users_json: bytes) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(_users_file(tmp_path, users_json))
    with pytest.raises(UsersFileError, match="symbolic link"):
        load_users(link)


def test_a_users_file_others_can_write_is_refused_with_the_chmod(
    tmp_path: Path, users_json: bytes
) -> None:
    path = _users_file(tmp_path, users_json, 0o664)
    with pytest.raises(UsersFileError, match=r"writable by others \(mode 0664\).*chmod go-w"):
        load_users(path)


def _tls_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Files checked for their kind, owner and mode only: their content is never read here."""
    cert, key, ca = tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem"
    for path, mode in ((cert, 0o644), (key, 0o600), (ca, 0o644)):
        path.write_text("-----BEGIN PRIVATE KEY-----\nnot-a-real-key\n")
        path.chmod(mode)
    return cert, key, ca


def test_tls_files_only_their_owner_can_write_and_a_private_key_pass(tmp_path: Path) -> None:
    check_tls_files(*_tls_files(tmp_path))


@pytest.mark.parametrize("mode", [0o640, 0o604])
def test_a_tls_key_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    cert, key, ca = _tls_files(tmp_path)
    key.chmod(mode)
    with pytest.raises(TlsFilesError, match=f"the TLS key {key} is open to others") as caught:
        check_tls_files(cert, key, ca)
    assert "not-a-real-key" not in str(caught.value) and f"chmod 600 {key}" in str(caught.value)


@as_root
@pytest.mark.parametrize("which", ["cert", "key", "ca"])
def test_a_tls_file_another_user_owns_is_refused(tmp_path: Path, which: str) -> None:
    files = dict(zip(("cert", "key", "ca"), _tls_files(tmp_path), strict=True))
    os.chown(files[which], ANOTHER_UID, -1)
    with pytest.raises(TlsFilesError, match=f"uid {ANOTHER_UID}.*chown root"):
        check_tls_files(files["cert"], files["key"], files["ca"])


@pytest.mark.parametrize("which", ["cert", "key", "ca"])
def test_a_tls_file_that_is_a_symlink_is_refused(tmp_path: Path, which: str) -> None:
    files = dict(zip(("cert", "key", "ca"), _tls_files(tmp_path), strict=True))
    link = tmp_path / f"{which}-link"
    link.symlink_to(files[which])
    files[which] = link
    with pytest.raises(TlsFilesError, match="symbolic link"):
        check_tls_files(files["cert"], files["key"], files["ca"])


def test_a_tls_ca_others_can_write_is_refused(tmp_path: Path) -> None:
    cert, key, ca = _tls_files(tmp_path)
    ca.chmod(0o666)
    with pytest.raises(TlsFilesError, match=f"the TLS CA file {ca} is writable by others"):
        check_tls_files(cert, key, ca)
