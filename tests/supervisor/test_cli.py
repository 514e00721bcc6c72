"""The command line as an operator meets it: exit codes and one clear line, no tracebacks."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from locker.epoch import EpochRegistry
from locker.lease import Lease
from tests.harness.group import free_port


def primacy(*args: str, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )


def _assert_clean_failure(result: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert result.returncode == code, result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_share_exits_3(tmp_path: Path) -> None:
    result = primacy(
        "run",
        "--node-id",
        "a",
        "--share",
        str(tmp_path / "nope"),
        "--http",
        f"127.0.0.1:{free_port()}",
    )
    _assert_clean_failure(result, 3, "does not exist")


def test_share_that_is_a_file_exits_3(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    result = primacy("run", "--node-id", "a", "--share", str(tmp_path / "f"))
    _assert_clean_failure(result, 3, "not a directory")


def test_bad_flag_value_exits_2(share: Path) -> None:
    result = primacy(
        "run", "--node-id", "a", "--share", str(share), "--lock-keep-alive-period-ms", "1"
    )
    _assert_clean_failure(result, 2, "lock_keep_alive_period_ms")


def test_exec_without_a_command_exits_2(share: Path) -> None:
    result = primacy("run", "--node-id", "a", "--share", str(share), "--exec")
    _assert_clean_failure(result, 2, "--exec needs a command")


def test_busy_http_port_exits_4(share: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = primacy(
            "run", "--node-id", "a", "--share", str(share), "--http", f"127.0.0.1:{port}"
        )
    _assert_clean_failure(result, 4, "cannot listen")


def test_status_from_the_share(share: Path) -> None:
    lease = Lease(share, "alpha")
    assert lease.try_acquire()
    epoch = lease.claim_epoch()
    result = primacy("status", "--share", str(share))
    assert result.returncode == 0, result.stderr
    assert "held by alpha" in result.stdout and f"current epoch: {epoch}" in result.stdout
    lease.release()
    result = primacy("status", "--share", str(share))
    assert "released by alpha" in result.stdout


def test_status_json_from_the_share(share: Path) -> None:
    EpochRegistry(share).claim_next({"node_id": "x"})
    import json

    data = json.loads(primacy("status", "--share", str(share), "--json").stdout)
    assert data["epoch"] == 1 and data["holder"] is None and data["epoch_record"]["node_id"] == "x"


def test_status_from_an_unreachable_url_is_a_clear_error() -> None:
    result = primacy("status", "--url", f"http://127.0.0.1:{free_port()}")
    _assert_clean_failure(result, 1, "cannot read")


@pytest.mark.parametrize("command", ["run", "status", "demo"])
def test_help_describes_each_command(command: str) -> None:
    result = primacy(command, "--help")
    assert result.returncode == 0 and "usage: primacy" in result.stdout
