"""Issue 45 item 8: one convention for every command, through the real command line.

On 173b3ec: `primacy status` exited 0 with no master; `doctor --bogus` exited 2 where the
guide says usage errors are 64 (2 is a refused configuration); `... --json | head` ended
in a BrokenPipeError traceback; an unknown config key printed all 60 known keys and no
"did you mean"; stopped nodes stayed in the registry with no command to remove them. (The
count of `consume` after a failover is in tests/client/test_ack_latency.py.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from primacy.cli.exits import EXIT_COMMAND_LINE, EXIT_NO_MASTER, EXIT_OK, EXIT_REFUSED
from primacy.cli.main import build_parser
from primacy.share.posix import PosixShare
from primacy.share.records import NodeEntry
from primacy.supervisor.config import CONFIG_KEYS
from tests.harness.cli import PRIMACY, primacy
from tests.harness.group import Group, free_port, wait_until


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [subparsers] = [a for a in parser._actions if a.choices and a.dest == "command"]
    assert isinstance(subparsers.choices, dict)
    return subparsers.choices


def _commands() -> list[str]:
    return sorted(_subparsers(build_parser(run_flags=False)))


@pytest.mark.parametrize("command", _commands())
def test_a_command_parsed_alone_is_the_whole_command_lines(command: str) -> None:
    """``primacy CMD`` builds CMD's parser and no other command's (cli/main.py
    REGISTERED_BY): it must be the one the whole command line has, or a command left out
    of the map would not parse at all."""
    alone = _subparsers(build_parser(run_flags=False, only=command))
    whole = _subparsers(build_parser(run_flags=False))
    assert alone[command].format_help() == whole[command].format_help()


def test_a_short_command_loads_no_other_commands_libraries() -> None:
    """``primacy status`` does not import the STOMP client, the journal tools or the
    replay's: every command once paid for all of them at start."""
    loaded = subprocess.run(
        [sys.executable, "-c",
         "import sys; from primacy.cli.main import build_parser; "
         "build_parser(run_flags=False, only='status').parse_args(['status', '--share', '/']); "
         "print(*sorted(sys.modules))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert "primacy.cli.main" in loaded
    others = {"primacy.cli.messaging", "primacy.cli.journal", "primacy.cli.replay"}
    assert others.isdisjoint(loaded), sorted(others & set(loaded))


@pytest.mark.parametrize("command", _commands())
def test_a_command_line_that_does_not_parse_exits_64_on_every_command(command: str) -> None:
    result = primacy(command, "--bogus-option", timeout_s=60)
    assert result.returncode == EXIT_COMMAND_LINE == 64, (command, result.stderr)
    assert "usage: primacy" in result.stderr and "Traceback" not in result.stderr


def test_a_refused_value_is_2_and_an_unparsable_one_64(tmp_path: Path) -> None:
    refused = primacy("run", "--node-id", "a b", "--share", str(tmp_path))
    assert refused.returncode == EXIT_REFUSED == 2, refused.stderr
    unparsable = primacy("send", "tcp://127.0.0.1:1", "/queue/a", "--count", "many")
    assert unparsable.returncode == 64, unparsable.stderr


def _plant_registry(share: Path, count: int, role: str = "slave", age_s: float = 0) -> None:
    port = PosixShare(share)
    for number in range(count):
        port.publish_node(
            NodeEntry(
                f"n{number:04d}", "h", 1, "127.0.0.1:1", "normal", role, None, time.time() - age_s
            )
        )


def test_output_cut_short_by_its_reader_is_no_traceback(share: Path) -> None:
    """`status --json | head`: the reader leaves long before the output ends (3000 entries,
    far more than a pipe holds)."""
    _plant_registry(share, 3000)
    pipeline = subprocess.run(
        f"{' '.join(PRIMACY)} status --share {share} --json | head -c 100 >/dev/null;"
        " echo ${PIPESTATUS[0]} >&2",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in pipeline.stderr and "BrokenPipe" not in pipeline.stderr, (
        pipeline.stderr
    )
    assert pipeline.stderr.strip().splitlines()[-1] == "141"


def test_status_exits_6_without_a_master_and_0_with_one(group: Group, share: Path) -> None:
    empty = primacy("status", "--share", str(share))
    assert empty.returncode == EXIT_NO_MASTER == 6, empty.stderr
    as_json = primacy("status", "--share", str(share), "--json")
    assert as_json.returncode == 6 and json.loads(as_json.stdout)["live_masters"] == []
    master = group.start("a")
    wait_until(master.is_master, 30, "a to serve")
    slave = group.start("b")
    wait_until(lambda: slave.status("/slave") == 200, 30, "b to be a slave")
    for where in (("--share", str(share)), ("--url", f"http://127.0.0.1:{slave.port}")):
        found = primacy("status", *where)
        assert found.returncode == EXIT_OK, (where, found.stderr)
    assert json.loads(primacy("status", "--share", str(share), "--json").stdout)[
        "live_masters"
    ] == ["a"]
    master.signal(15)
    wait_until(lambda: not master.alive(), 30, "a to stop")
    gone = primacy("status", "--url", f"http://127.0.0.1:{slave.port}")
    if gone.returncode == EXIT_OK:  # b may have taken over already: ask it again later
        wait_until(slave.is_master, 30, "b to take over")
    else:
        assert gone.returncode == 6 and "no live node serves as master" in gone.stderr


def test_an_unknown_config_key_gets_a_suggestion_not_the_whole_list(tmp_path: Path) -> None:
    config = tmp_path / "node.toml"
    config.write_text(f'node_id = "a"\nshare = "{tmp_path}"\nlock_keep_alive_period = 500\n')
    result = primacy("run", "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert "unknown key 'lock_keep_alive_period'" in result.stderr
    assert "did you mean 'lock_keep_alive_period_ms'" in result.stderr
    assert sum(key in result.stderr for key in CONFIG_KEYS) <= 3, result.stderr
    config.write_text(f'node_id = "a"\nshare = "{tmp_path}"\nfrobnicate = 1\n')
    far = primacy("run", "--config", str(config))
    assert far.returncode == 2 and "primacy run --help" in far.stderr, far.stderr


def test_forget_removes_stopped_nodes_and_refuses_live_ones(group: Group, share: Path) -> None:
    _plant_registry(share, 2, age_s=3600)  # n0000 and n0001 stopped an hour ago
    live = group.start("a")
    wait_until(live.is_master, 30, "a to serve")
    refused = primacy("forget", "n0000", "a", "nobody", "--share", str(share))
    assert refused.returncode == 1, refused.stderr
    assert "a is live" in refused.stderr and "nobody is not in the registry" in refused.stderr
    assert len(PosixShare(share).node_entries()) == 3  # nothing forgotten
    forgot = primacy("forget", "n0000", "n0001", "--share", str(share), "--json")
    assert forgot.returncode == 0, forgot.stderr
    assert [e["node_id"] for e in json.loads(forgot.stdout)["forgotten"]] == ["n0000", "n0001"]
    cluster = primacy("cluster", "--share", str(share), "--json")
    assert [m["node_id"] for m in json.loads(cluster.stdout)] == ["a"]


@pytest.mark.parametrize("command", ["status", "cluster", "forget"])
def test_a_share_that_cannot_be_read_is_3_on_every_reader(tmp_path: Path, command: str) -> None:
    names = ["n1"] if command == "forget" else []
    result = primacy(command, *names, "--share", str(tmp_path / "no-such-share"))
    assert result.returncode == 3 and "PRIMACY-2002" in result.stderr, result.stderr


REPORTING = [
    ("status",),
    ("cluster",),
    ("doctor",),
    ("forget",),
    ("journal", "verify"),
    ("journal", "dump"),
    ("journal", "stats"),
    ("users", "list"),
    ("send",),
    ("consume",),
    ("switchover",),
    ("pause",),
    ("resume",),
]


@pytest.mark.parametrize("command", REPORTING, ids=" ".join)
def test_every_command_that_reports_takes_json(command: tuple[str, ...]) -> None:
    """On 173b3ec only status, cluster, doctor and journal dump had --json."""
    shown = primacy(*command, "--help")
    assert shown.returncode == 0 and "--json" in shown.stdout, shown.stdout


def test_the_json_reports_parse(group: Group, share: Path, tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    added = primacy("users", "add", str(users), "app", stdin="a long password\n")
    assert added.returncode == 0, added.stderr
    listed = json.loads(primacy("users", "list", str(users), "--json").stdout)
    assert [(user["name"], sorted(user)) for user in listed] == [
        ("app", ["name", "receive", "send"])  # never the password's hash
    ]

    port = free_port()
    node = group.start("a", "--stomp", f"127.0.0.1:{port}")
    wait_until(node.is_master, 30, "a to serve")
    url = f"tcp://127.0.0.1:{port}"
    sent = primacy("send", url, "/queue/j", "--count", "3", "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["receipted"] == 3
    consumed = primacy("consume", url, "/queue/j", "--count", "3", "--json")
    assert consumed.returncode == 0, consumed.stderr
    *messages, summary = map(json.loads, consumed.stdout.splitlines())
    assert [m["body"] for m in messages] == ["message 1", "message 2", "message 3"]
    assert (summary["consumed"], summary["without_receipt"]) == (3, 0)
    for command in ("stats", "verify"):
        report = primacy("journal", command, str(share), "--json")
        assert report.returncode == 0, report.stderr
        assert isinstance(json.loads(report.stdout), dict)
