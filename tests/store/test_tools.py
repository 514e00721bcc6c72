"""``primacy journal verify|dump|stats`` through the argparse glue."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from primacy.cli import journal as journal_cli
from primacy.store.journal import JournalStore


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="primacy")
    journal_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


def test_stats_dump_and_verify(
    open_store: Callable[..., JournalStore], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    share = tmp_path / "share"
    store = open_store()
    for i in range(5):
        store.append_send("q", f"m{i}", f"hello {i}".encode()).result(timeout=5)
    store.append_ack("q", "m0").result(timeout=5)
    store.checkpoint().result(timeout=5)
    store.close()
    capsys.readouterr()

    assert run(["journal", "stats", str(share)]) == 0
    out = capsys.readouterr().out
    assert "records: 7" in out and "pending_messages: 4" in out and "epochs: (1,)" in out

    assert run(["journal", "dump", str(share), "--from", "3", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["sequence"] for r in lines] == [3, 4, 5, 6, 7]
    assert lines[0]["payload"] == "hello 1" and lines[-1]["type"] == "ACK"

    assert run(["journal", "verify", str(share)]) == 0
    segment = next((share / "journal").glob("*.seg"))
    data = bytearray(segment.read_bytes())
    data[200] ^= 1
    segment.write_bytes(bytes(data))
    capsys.readouterr()
    assert run(["journal", "verify", str(share)]) == 1
    assert "PROBLEM" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["verify", "stats", "dump"])
def test_a_missing_share_or_journal_is_an_error_not_an_empty_journal(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for share in (tmp_path / "does-not-exist", tmp_path):
        assert run(["journal", command, str(share)]) == 3  # EXIT_SHARE_UNUSABLE
        assert "is not a share with a journal" in capsys.readouterr().err
