"""The command line as an operator meets it: exit codes and one clear line, no tracebacks."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.cli.main import build_parser
from primacy.locker.lease import Lease
from primacy.share.posix import PosixShare
from primacy.share.records import EpochRecord, NodeEntry
from primacy.supervisor.config import CONFIG_KEYS
from tests.harness.cli import PRIMACY_SCRIPT, primacy
from tests.harness.group import free_port
from tests.supervisor.private_mount import private_mount_unavailable_reason


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


@pytest.mark.parametrize(
    ("http_host", "stomp_host"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.1", "0.0.0.0"),
        # Issue 27: names and other spellings of one address were compared as text, and the
        # node claimed 60 epochs in 10 minutes, unable to serve.
        ("localhost", "127.0.0.1"),
        ("127.0.0.1", "[::]"),
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
    ],
)
def test_stomp_on_the_http_port_exits_2_before_anything_starts(
    share: Path, http_host: str, stomp_host: str
) -> None:
    # Found by trying it: the node claimed about nine epochs a second, unable to serve.
    port = free_port()
    result = primacy(
        "run",
        "--node-id",
        "a",
        "--share",
        str(share),
        "--http",
        f"{http_host}:{port}",
        "--stomp",
        f"{stomp_host}:{port}",
        timeout_s=30,
    )
    _assert_clean_failure(result, 2, "conflicting settings: stomp")
    assert not (share / "epochs").exists() or not any((share / "epochs").iterdir())


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
    empty = primacy("status", "--share", str(share))
    assert empty.returncode == 6, empty.stderr  # no node serves as master (EXIT_NO_MASTER)
    assert "lock: never taken" in empty.stdout
    assert "current epoch: none claimed yet" in empty.stdout  # not "epoch 0", no such epoch
    lease = Lease(PosixShare(share), "alpha")
    assert lease.try_acquire()
    epoch = lease.claim_epoch()
    result = primacy("status", "--share", str(share))
    assert result.returncode == 6, result.stderr  # a lock, but no node registered as master
    assert "held by alpha" in result.stdout and f"current epoch: {epoch}" in result.stdout
    lease.release()
    result = primacy("status", "--share", str(share))
    assert "released by alpha" in result.stdout


def test_status_json_from_the_share(share: Path) -> None:
    PosixShare(share).claim_epoch(EpochRecord(0, node_id="x"))
    import json

    data = json.loads(primacy("status", "--share", str(share), "--json").stdout)
    assert data["epoch"] == 1 and data["holder"] is None and data["epoch_record"]["node_id"] == "x"


def _killed_master_share(share: Path) -> None:
    """A share right after a kill -9 of master ``a``: ``b`` claimed epoch 2, ``a``'s registry
    entry still says master at epoch 1 (and live, until it ages), ``c`` never held an epoch."""
    port = PosixShare(share)
    port.claim_epoch(EpochRecord(0, node_id="a"))
    port.claim_epoch(EpochRecord(0, node_id="b"))
    now = time.time()
    for node_id, role, epoch in (("a", "master", 1), ("b", "master", 2), ("c", "slave", None)):
        port.publish_node(NodeEntry(node_id, "host", 1, "127.0.0.1:1", "normal", role, epoch, now))


def _rows(output: str) -> dict[str, str]:
    """Each node's line of a listing, by node id, whitespace collapsed."""
    return {line.split()[0]: " ".join(line.split()) for line in output.splitlines() if line}


@pytest.mark.parametrize("command", ["status", "cluster"])
def test_a_dead_masters_entry_reads_stale_and_no_epoch_reads_none(
    share: Path, command: str
) -> None:
    _killed_master_share(share)
    result = primacy(command, "--share", str(share))
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    assert "master (stale: epoch 1, current 2)" in rows["a"]
    assert rows["b"].startswith("b master ") and "stale" not in rows["b"]
    assert rows["c"].startswith("c slave ")
    assert "None" not in result.stdout
    # One node reads as master, whatever order the nodes are listed in.
    masters = [row for row in rows.values() if row.split()[1] == "master" and "stale" not in row]
    assert masters == [rows["b"]]


def test_status_from_an_unreachable_url_is_a_clear_error() -> None:
    result = primacy("status", "--url", f"http://127.0.0.1:{free_port()}")
    _assert_clean_failure(result, 1, "cannot read")


@pytest.mark.parametrize("command", ["run", "status", "demo"])
def test_help_describes_each_command(command: str) -> None:
    result = primacy(command, "--help")
    assert result.returncode == 0 and "usage: primacy" in result.stdout


def test_every_config_key_is_a_run_flag() -> None:
    """The config file's docstring and the example file promise this."""
    command = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    dests = {action.dest for action in command.choices["run"]._actions}
    assert "exec_marker" in dests  # `exec` is --exec -- CMD ARGS
    assert set(CONFIG_KEYS) - {"exec"} <= dests


@pytest.mark.parametrize(
    ("flag", "value", "key"),
    [
        ("--segment-max-bytes", "100", "segment_max_bytes"),
        ("--max-message-size", "0", "max_message_size"),
        ("--retention-max-age-s", "soon", "retention_max_age_s"),
        ("--retention-max-bytes", "-1", "retention_max_bytes"),
        ("--dedupe-window-messages", "-5", "dedupe_window_messages"),
        ("--exec-max-restarts", "-1", "exec_max_restarts"),
        ("--registry-refresh-ms", "5", "registry_refresh_ms"),
        ("--crash-loop-hold-off-ms", "999", "crash_loop_hold_off_ms"),
    ],
)
def test_a_bad_store_or_child_flag_exits_2_naming_the_key(
    share: Path, flag: str, value: str, key: str
) -> None:
    result = primacy("run", "--node-id", "a", "--share", str(share), flag, value)
    _assert_clean_failure(result, 2, f"PRIMACY-2001 bad value for '{key}'")


def test_a_hold_off_of_zero_is_refused_with_why(share: Path, tmp_path: Path) -> None:
    """Issue 27: ``crash_loop_hold_off_ms = 0`` was taken, and a node that could not serve
    claimed epoch after epoch without pause."""
    config = tmp_path / "node.toml"
    config.write_text(f'node_id = "a"\nshare = "{share}"\ncrash_loop_hold_off_ms = 0\n')
    result = primacy("run", "--config", str(config), timeout_s=30)
    _assert_clean_failure(
        result, 2, "bad value for 'crash_loop_hold_off_ms': must be at least 1000 ms"
    )
    assert not (share / "epochs").exists() or not any((share / "epochs").iterdir())


def test_a_bad_store_key_in_the_file_exits_2_naming_the_key(share: Path, tmp_path: Path) -> None:
    config = tmp_path / "node.toml"
    config.write_text(f'node_id = "a"\nshare = "{share}"\nmax_message_size = "big"\n')
    result = primacy("run", "--config", str(config))
    _assert_clean_failure(result, 2, "bad value for 'max_message_size'")


# ---- shares that cannot carry a primacy node, on real mounts -------------------


def _assert_one_error_line(result: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """Exit ``code``, no traceback, and exactly one error line, which says ``words``."""
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("primacy: ")]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word in errors[0], errors[0]
    assert " ERROR " not in result.stderr and " CRITICAL " not in result.stderr
    return errors[0]


def _on_a_read_only_mount(share: Path) -> list[str]:
    """Start primacy in a private mount namespace where ``share`` is a read-only tmpfs.

    The mount lives only in that namespace: it goes when the process exits,
    whatever happens to the test.
    """
    script = 'mount -t tmpfs -o ro primacy-readonly "$0" && exec "$@"'
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        str(share),
        PRIMACY_SCRIPT,
    ]


@pytest.fixture
def read_only_share(share: Path) -> Path:
    why_not = private_mount_unavailable_reason()
    if why_not is not None:
        pytest.skip(f"a read-only mount cannot be made here: {why_not}")
    return share


def test_a_read_only_share_is_refused_at_start(read_only_share: Path) -> None:
    # Root ignores mode bits, so the share is made unwritable the way it is in
    # production: a read-only mount. The doctor's mount check refuses it first.
    args = ["run", "--node-id", "a", "--share", str(read_only_share)]
    result = primacy(
        *args, "--http", f"127.0.0.1:{free_port()}", command=_on_a_read_only_mount(read_only_share)
    )
    _assert_one_error_line(result, 3, "PRIMACY-3020", "PRIMACY-3009", "read-only")


def test_a_read_only_share_is_refused_even_when_forced(read_only_share: Path) -> None:
    # Past the mount check, the share probe itself finds it cannot create a file.
    args = ["run", "--node-id", "a", "--share", str(read_only_share), "--force-unsupported-share"]
    result = primacy(
        *args, "--http", f"127.0.0.1:{free_port()}", command=_on_a_read_only_mount(read_only_share)
    )
    line = _assert_one_error_line(result, 3, "PRIMACY-2002", str(read_only_share))
    assert "Read-only file system" in line
    assert "PRIMACY-3021" in result.stderr  # the override was logged loudly


def _is_mounted(mountpoint: Path) -> bool:
    target = os.path.realpath(mountpoint)
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        return any(line.split()[4] == target for line in table)


@pytest.fixture(params=["grant", "refuse"])
def lockless_share(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A FUSE mount whose daemon grants every lock request, or refuses every one (ENOLCK)."""
    if not os.path.exists("/dev/fuse") or shutil.which("fusermount") is None:
        pytest.skip("no FUSE here: /dev/fuse or fusermount is missing")
    mode: str = request.param
    backing, mountpoint = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    mountpoint.mkdir()
    with open(tmp_path / "fuse.log", "wb") as log:
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.supervisor.lockless_fs",
                str(backing),
                str(mountpoint),
                mode,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 15
        while not _is_mounted(mountpoint):
            if daemon.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"cannot mount FUSE here: {(tmp_path / 'fuse.log').read_text()}")
            time.sleep(0.05)
        yield mode, mountpoint
    finally:
        subprocess.run(["fusermount", "-u", "-z", str(mountpoint)], capture_output=True)
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait(timeout=10)


@pytest.mark.parametrize("method", ["flock", "posix"])
def test_a_share_whose_locks_do_not_work_is_refused(
    lockless_share: tuple[str, Path], method: str
) -> None:
    mode, share = lockless_share
    result = primacy(
        "run",
        "--node-id",
        "a",
        "--share",
        str(share),
        "--http",
        f"127.0.0.1:{free_port()}",
        "--lock-method",
        method,
        command=(PRIMACY_SCRIPT,),
    )
    if mode == "grant":
        _assert_one_error_line(result, 3, "PRIMACY-2002", f"{method} locks", "do not exclude")
    else:
        _assert_one_error_line(
            result, 3, "PRIMACY-2002", f"does not support {method} locks", "No locks available"
        )
    assert os.listdir(share) == []  # the probe file is gone


# Commands that run a node, and so the only ones that need FastAPI, uvicorn and pydantic
# (the HTTP endpoint and the configuration): importing them took over a second of every
# `primacy status` or `--help`.
_NODE_ONLY_LIBRARIES = {"fastapi", "uvicorn", "pydantic", "starlette"}
_REPLAY_LIBRARIES = {"numpy", "pyarrow", "pyspark"}


def _libraries_loaded_by(commands: list[list[str]]) -> list[str]:
    """Which of those libraries one process loads to build the parser and run ``commands``
    (each to its end, output discarded)."""
    watched = sorted(_NODE_ONLY_LIBRARIES | _REPLAY_LIBRARIES)
    script = (
        "import contextlib, io, json, sys\n"
        "from primacy.cli.main import build_parser, main\n"
        "build_parser(run_flags=False)\n"
        f"for argv in {commands!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        main(argv)\n"
        f"print(json.dumps(sorted({watched!r} & sys.modules.keys())))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(loaded.stdout))


def test_the_command_line_loads_none_of_the_replays_or_the_nodes_libraries(share: Path) -> None:
    # Every node runs this command line: numpy alone would add about 11 MiB to every
    # master's and slave's memory (a soak measured 55 -> 66 MiB when it crept in).
    # Commands that do not run a node load none of the node's libraries either.
    port = PosixShare(share)
    port.claim_epoch(EpochRecord(0, node_id="a"))
    port.publish_node(NodeEntry("a", "host", 1, "127.0.0.1:1", "normal", "master", 1, time.time()))
    commands = [
        ["--help"],
        ["--version"],
        ["status", "--share", str(share)],
        ["journal", "--help"],
        ["users", "--help"],
        ["consume", "--help"],
        ["send", "--help"],
    ]
    assert _libraries_loaded_by(commands) == []


def test_only_run_loads_the_nodes_libraries() -> None:
    # The check above can fail: `run --help` shows flags built from the configuration.
    assert set(_libraries_loaded_by([["run", "--help"]])) == {"pydantic"}


def test_run_help_still_lists_every_flag_and_the_exit_codes() -> None:
    result = primacy("run", "--help")
    assert result.returncode == 0, result.stderr
    assert "--lock-keep-alive-period-ms" in result.stdout and "--exec" in result.stdout
    assert "3  the share is unusable" in result.stdout


def test_the_top_level_help_names_run_without_its_flags() -> None:
    result = primacy("--help")
    assert result.returncode == 0 and "run this node's supervisor" in result.stdout
    assert "--lock-keep-alive-period-ms" not in result.stdout


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    result = primacy("--version")
    first, hot_path = result.stdout.splitlines()
    assert (result.returncode, first, result.stderr) == (0, f"primacy {version('primacy')}", "")
    assert hot_path.startswith("hot path: ")  # what it says: tests/compiled/test_fresh.py
