"""``primacy send`` / ``primacy consume`` through their argparse glue, against a live service."""

from __future__ import annotations

import argparse

import pytest

from primacy.cli import codes
from primacy.cli.exits import EXIT_FEWER_THAN_COUNT, EXIT_OK
from primacy.cli.messaging import register
from tests.broker.nodes import Masters, stored_state
from tests.broker.stomppy import StompPy
from tests.harness.cli import primacy
from tests.harness.group import Group, free_port, wait_until


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


@pytest.mark.slow
def test_consume_exits_5_when_fewer_than_count_arrived(group: Group) -> None:
    """A real node and the real command line: a script can tell that messages are missing."""
    port = free_port()
    node = group.start("n1", "--stomp", f"127.0.0.1:{port}")
    wait_until(node.is_master, 30, "n1 to serve")
    url = f"tcp://127.0.0.1:{port}"
    sent = primacy("send", url, "/queue/short", "--count", "2")
    assert sent.returncode == EXIT_OK, sent.stderr

    short = primacy("consume", url, "/queue/short", "--count", "3", "--idle-timeout-s", "1")
    assert short.returncode == EXIT_FEWER_THAN_COUNT == 5
    assert f"{codes.CONSUMED_FEWER} received 2 of the 3 messages asked for" in short.stderr
    assert "Traceback" not in short.stderr

    assert primacy("send", url, "/queue/short").returncode == EXIT_OK
    enough = primacy("consume", url, "/queue/short", "--count", "1", "--idle-timeout-s", "1")
    assert enough.returncode == EXIT_OK
    assert enough.stderr.splitlines()[-1].startswith(
        "consumed 1 (1 distinct, 0 duplicate, 0 redelivered, 0 without receipt), failovers 0, "
    )
    # Without --count, stopping when the queue is idle is the normal end.
    assert primacy("consume", url, "/queue/short", "--idle-timeout-s", "1").returncode == EXIT_OK


def test_consume_prints_one_escaped_line_a_message(
    masters: Masters, capsys: pytest.CaptureFixture[str]
) -> None:
    """A producer chooses the body: an escape sequence in it (here one that retitles the
    terminal) or a newline must not reach the operator's terminal as such. (Headers, the
    id among them, cannot hold control characters: the broker refuses them.)"""
    master = masters.start()
    producer = StompPy(master.address)
    try:
        assert producer.send("/queue/esc", "title\x1b]0;owned\x07\nsecond\tline\\")
    finally:
        producer.close()
    assert run("consume", f"tcp://127.0.0.1:{master.address[1]}", "/queue/esc", "--count", "1") == 0
    [line] = capsys.readouterr().out.splitlines()
    message_id, body = line.split("\t")
    assert message_id.startswith("ID:")
    assert body == "title\\x1b]0;owned\\x07\\x0asecond\\x09line\\\\"
