"""The admin token file (issue 42, item 6): read only from a regular file private to its owner.

Before ``share/secret_file.py`` the token was checked with ``os.stat`` (which follows a
symlink) and read by name: a symlink to a private file passed, and a FIFO was read, hanging
the node's start while nobody wrote to it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from primacy.api.admin import TokenFileError, load_token

TOKEN = "s3cret-token-for-tests-only"


def _token_file(tmp_path: Path, mode: int = 0o600, name: str = "admin.token") -> Path:
    path = tmp_path / name
    path.write_text(TOKEN + "\n")
    path.chmod(mode)
    return path


def _outcome(path: Path, timeout_s: float = 5.0) -> str | BaseException | None:
    """What ``load_token`` returned or raised; None if it was still waiting after the bound."""
    outcome: list[str | BaseException] = []

    def attempt() -> None:
        try:
            outcome.append(load_token(path))
        except BaseException as exc:  # handed to the test to judge
            outcome.append(exc)

    runner = threading.Thread(target=attempt, daemon=True)
    runner.start()
    runner.join(timeout_s)
    return outcome[0] if outcome else None


def test_the_token_of_a_private_file_is_read_without_its_newline(tmp_path: Path) -> None:
    assert load_token(_token_file(tmp_path)) == TOKEN


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_token_others_can_read_is_refused_with_the_chmod(tmp_path: Path, mode: int) -> None:
    path = _token_file(tmp_path, mode)
    with pytest.raises(TokenFileError, match=f"chmod 600 {path}") as caught:
        load_token(path)
    assert TOKEN not in str(caught.value)


def test_a_symlink_to_a_private_token_file_is_refused(tmp_path: Path) -> None:
    target = _token_file(tmp_path)
    link = tmp_path / "token-link"
    link.symlink_to(target)
    with pytest.raises(TokenFileError, match="symbolic link") as caught:
        load_token(link)
    assert str(target) in str(caught.value) and TOKEN not in str(caught.value)


def test_a_fifo_is_refused_at_once_even_with_a_token_waiting_in_it(tmp_path: Path) -> None:
    fifo = tmp_path / "admin.token"
    os.mkfifo(fifo, 0o600)
    writer = os.open(fifo, os.O_RDWR)  # holds the FIFO open: a read by name never sees its end
    try:
        os.write(writer, (TOKEN + "\n").encode())
        outcome = _outcome(fifo)
    finally:
        os.close(writer)
    assert isinstance(outcome, TokenFileError), f"load_token gave {outcome!r}"
    assert "FIFO" in str(outcome) and TOKEN not in str(outcome)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away takes root")
def test_a_token_file_another_user_owns_is_refused_with_the_chown(tmp_path: Path) -> None:
    path = _token_file(tmp_path)
    os.chown(path, 4242, -1)
    with pytest.raises(TokenFileError, match=f"uid 4242.*chown root {path}$"):
        load_token(path)


def test_a_short_token_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "admin.token"
    path.write_text("short\n")
    path.chmod(0o600)
    with pytest.raises(TokenFileError, match="shorter than 16 characters"):
        load_token(path)


def test_a_missing_token_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match="does not exist"):
        load_token(tmp_path / "admin.token")
