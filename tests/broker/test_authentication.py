"""Logins and destinations, seen from stock stomp.py clients: a users file of argon2id hashes
decides who may connect and what each may send to and receive from (issue 15)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from primacy.broker import codes
from primacy.broker.authentication import FIRST_DELAY_S
from primacy.broker.config import BrokerConfig
from primacy.broker.frames import Frame
from primacy.broker.users import User, destination_matches, hash_password, save_users
from tests.broker.nodes import Masters, RawClient, eventually, stored_send_ids
from tests.broker.stomppy import StompPy

PASSWORD = "correct horse battery"


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    path = tmp_path / "users.json"
    save_users(
        path,
        {
            "alice": User("alice", hash_password(PASSWORD)),
            "orders": User(
                "orders",
                hash_password(PASSWORD),
                send=("/queue/orders.>",),
                receive=("/queue/orders.*",),
            ),
        },
    )
    return path


def _login(address: tuple[str, int], login: str | None, passcode: str | None) -> list[Frame]:
    """A raw CONNECT; every frame until the broker closes (or the CONNECTED)."""
    client = RawClient(address)
    headers = {"accept-version": "1.2", "host": "x"}
    if login is not None:
        headers["login"] = login
    if passcode is not None:
        headers["passcode"] = passcode
    client.send("CONNECT", headers)
    first = client.read()
    frames = [first] if first.command == "CONNECTED" else [first, *client.read_until_closed()]
    client.close()
    return frames


def test_a_user_of_the_file_connects_and_works(masters: Masters, users_file: Path) -> None:
    master = masters.start(BrokerConfig(stomp_users=users_file))
    client = StompPy(master.address, login="alice", passcode=PASSWORD)
    assert client.send("/queue/anything", "hello")
    client.subscribe("/queue/anything", "s")
    assert client.message().body == "hello"
    client.close()
    stats = master.service.stats()
    assert stats["stomp_auth"] == "users-file" and stats["logins_ok"] == 1


@pytest.mark.parametrize(
    ("login", "passcode", "why"),
    [
        ("alice", "not-the-passcode", "wrong password"),
        ("mallory", PASSWORD, "unknown user"),
        (None, None, "no login"),
        ("alice", None, "no login"),
    ],
)
def test_a_wrong_login_gets_one_answer_and_the_reason_goes_to_the_log_only(
    masters: Masters,
    users_file: Path,
    caplog: pytest.LogCaptureFixture,
    login: str | None,
    passcode: str | None,
    why: str,
) -> None:
    master = masters.start(BrokerConfig(stomp_users=users_file))
    caplog.set_level(logging.WARNING, "primacy.broker")
    frames = _login(master.address, login, passcode)
    (error,) = [frame for frame in frames if frame.command == "ERROR"]
    assert error.get("message", "").startswith(codes.LOGIN_FAILED)
    assert b"check the login and passcode" in error.body  # the same, whatever the cause
    assert f"refused: {why}" in caplog.text
    assert PASSWORD not in caplog.text and "not-the-passcode" not in caplog.text
    assert master.service.stats()["logins_failed"] == 1


def test_failed_logins_from_one_address_are_answered_ever_more_slowly(
    masters: Masters, users_file: Path
) -> None:
    """So a password cannot be guessed at line rate: after a failure, the next login of that
    source waits its turn, FIRST_DELAY_S, then twice that, and so on. (A lower bound only: a
    busy machine makes the answers later, never sooner.)"""
    master = masters.start(BrokerConfig(stomp_users=users_file))
    waits = []
    for _ in range(3):
        started = time.monotonic()
        frames = _login(master.address, "alice", "guess")
        waits.append(time.monotonic() - started)
        assert frames[0].command == "ERROR"
    assert waits[1] >= FIRST_DELAY_S and waits[2] >= 2 * FIRST_DELAY_S
    # The right password from that address waits its turn too, and is let in.
    assert _login(master.address, "alice", PASSWORD)[0].command == "CONNECTED"


def test_a_send_or_subscribe_outside_the_users_patterns_is_refused_and_nothing_stored(
    masters: Masters, users_file: Path
) -> None:
    master = masters.start(BrokerConfig(stomp_users=users_file))
    producer = StompPy(master.address, login="orders", passcode=PASSWORD)
    assert producer.send("/queue/orders.eu.paris", "allowed")
    assert not producer.send("/queue/payroll", "not allowed", **{"message-id": "p1"})
    error = producer.listener.errors[0]
    assert error.headers["message"].startswith(codes.NOT_AUTHORIZED)
    assert "'orders' may not send to /queue/payroll" in error.body
    assert len(stored_send_ids(masters.share)) == 1  # "allowed" only (ids are "<login>/<id>")
    producer.close()

    consumer = StompPy(master.address, login="orders", passcode=PASSWORD)
    consumer.subscribe("/queue/orders.eu", "ok")  # one part after orders: allowed
    receipt = "r-sub"
    consumer.connection.subscribe("/queue/orders.eu.paris", "no", headers={"receipt": receipt})
    assert not consumer.listener.wait_receipt(receipt)
    assert "may not receive from /queue/orders.eu.paris" in consumer.listener.errors[0].body
    consumer.close()
    assert master.service.stats()["unauthorized"] == 2


def test_edits_to_the_users_file_apply_to_the_next_connect_without_a_restart(
    masters: Masters, users_file: Path
) -> None:
    master = masters.start(BrokerConfig(stomp_users=users_file))
    alice = StompPy(master.address, login="alice", passcode=PASSWORD)
    save_users(users_file, {"bob": User("bob", hash_password("bobs password"))})
    assert _login(master.address, "bob", "bobs password")[0].command == "CONNECTED"
    assert _login(master.address, "alice", PASSWORD)[0].command == "ERROR"
    assert alice.send("/queue/q", "an open connection keeps its login")
    alice.close()


def test_a_users_file_made_writable_by_others_is_not_read_again(
    masters: Masters, users_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    master = masters.start(BrokerConfig(stomp_users=users_file))
    save_users(users_file, {"bob": User("bob", hash_password("bobs password"))})
    users_file.chmod(0o666)  # whoever can write it could let themselves in
    assert _login(master.address, "bob", "bobs password")[0].command == "ERROR"
    assert _login(master.address, "alice", PASSWORD)[0].command == "CONNECTED"
    eventually(lambda: codes.USERS_FILE_REFUSED in caplog.text, "the refusal in the log")


@pytest.mark.parametrize(
    ("pattern", "destination", "matches"),
    [
        (">", "/queue/a", True),
        ("/queue/orders.>", "/queue/orders.eu", True),
        ("/queue/orders.>", "/queue/orders.eu.paris", True),
        ("/queue/orders.>", "/queue/orders", False),
        ("orders.*", "/queue/orders.eu", True),
        ("orders.*", "/queue/orders.eu.paris", False),
        ("/queue/orders", "/queue/orders", True),
        ("/queue/orders", "/queue/orders2", False),
        ("*.eu", "/queue/orders.eu", True),
    ],
)
def test_destination_patterns_use_activemqs_wildcards(
    pattern: str, destination: str, matches: bool
) -> None:
    assert destination_matches(pattern, destination) is matches
