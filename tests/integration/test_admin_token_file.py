"""Issue 45 item 6: a wrong ``--token-file`` is refused without a word of what it holds.

`primacy pause --token-file example-group.toml` printed ``Invalid header value b'Bearer #
/etc/primacy/GROUP.toml ...`` and every line after it; pointed at a key, that is a secret on
the terminal and in the shell's scrollback. The real command line, against a listener that
accepts connections (the refusal must come before any request).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.cli import codes
from tests.harness.cli import primacy

SECRET = "s3cret-do-not-print"

CONFIG = f"""# /etc/primacy/GROUP.toml
share = "/srv/share"
stomp_passcode = "{SECRET}"
"""


@pytest.fixture
def endpoint() -> Iterator[str]:
    """An address that accepts connections and never answers: the request would get as far
    as sending its headers."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.mark.parametrize("command", ["pause", "resume", "switchover"])
@pytest.mark.parametrize(
    ("content", "why"),
    [
        (CONFIG.encode(), "it has 3 lines"),
        (b"-----BEGIN PRIVATE KEY-----" + SECRET.encode() + b"\x00\x81", "not printable ASCII"),
        (b"\n  \n", "it is empty"),
    ],
)
def test_a_file_that_holds_no_token_is_refused_unquoted(
    tmp_path: Path, endpoint: str, command: str, content: bytes, why: str
) -> None:
    wrong = tmp_path / "example-group.toml"
    wrong.write_bytes(content)
    result = primacy(command, "--url", endpoint, "--token-file", str(wrong), timeout_s=30)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"primacy: {codes.TOKEN_FILE_REFUSED} the token file "), (
        result.stderr
    )
    assert why in result.stderr
    assert f"{wrong}" in result.stderr
    for shown in (result.stdout, result.stderr):
        assert SECRET not in shown
        assert "Bearer" not in shown and "GROUP.toml" not in shown
    assert "Traceback" not in result.stderr


def test_a_missing_token_file_is_a_usage_error(tmp_path: Path, endpoint: str) -> None:
    result = primacy("pause", "--url", endpoint, "--token-file", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert f"{codes.TOKEN_FILE_REFUSED} cannot read the token file" in result.stderr
