"""``primacy send`` / ``primacy consume`` through their argparse glue, against a live service."""

from __future__ import annotations

import argparse

import pytest

from primacy.cli.messaging import register
from tests.broker.nodes import Masters, stored_state


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="primacy")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


def test_send_then_consume(masters: Masters, capsys: pytest.CaptureFixture[str]) -> None:
    master = masters.start()
    url = f"failover:(tcp://127.0.0.1:{master.address[1]})?randomize=false"
    assert run("send", url, "/queue/cli", "--count", "5", "--window", "2") == 0
    assert "sent 5, receipted 5" in capsys.readouterr().err
    assert len(stored_state(masters.share).pending["/queue/cli"]) == 5
    assert run("consume", url, "/queue/cli", "--count", "5") == 0
    out = capsys.readouterr()
    assert [line.split("\t")[1] for line in out.out.splitlines()] == [
        f"message {n}" for n in range(1, 6)
    ]
    assert "consumed 5 (5 distinct, 0 duplicate" in out.err
    assert stored_state(masters.share).pending == {}


def test_a_bad_url_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("send", "failover:(tcp://a:1)?nope=1", "/queue/a") == 2
    assert "PRIMACY-1601" in capsys.readouterr().err


def test_no_broker_is_a_failure(capsys: pytest.CaptureFixture[str]) -> None:
    from primacy.cli.localgroup import free_port

    url = f"failover:(tcp://127.0.0.1:{free_port()})?startupMaxReconnectAttempts=0"
    assert run("consume", url, "/queue/a") == 1
    assert "PRIMACY-1602" in capsys.readouterr().err
