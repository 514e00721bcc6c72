"""Hostile senders and poison messages, seen from stock stomp.py clients (issue 27: 1, 8, 11, 15).

One real ``primacy run`` node serves the module (a users file of two logins, small
limits); each test uses destinations of its own and leaves at most its held-back messages
behind. The failover test runs two masters in this process (tests/broker/nodes.py), to
fail over between them at a chosen instant.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import stomp

from primacy.broker import codes
from primacy.broker.config import BrokerConfig
from primacy.broker.users import User, hash_password, save_users
from primacy.cli.localgroup import free_port
from primacy.store import format as fmt
from primacy.store import payloads
from tests.broker.nodes import Masters, eventually, stored_state
from tests.broker.stomppy import Collector, StompPy
from tests.harness.group import Group, NodeProcess

pytestmark = pytest.mark.slow  # a real node, and two in-process masters failing over

PASSWORD = "correct horse battery"
MAX_MESSAGE_SIZE = 10_000


@pytest.fixture(scope="module")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # mallory may send anywhere but receive nothing of others: all she can do to alice's
    # messages is what her SENDs do.
    path = tmp_path_factory.mktemp("users") / "users.json"
    save_users(
        path,
        {
            "alice": User("alice", hash_password(PASSWORD)),
            "mallory": User("mallory", hash_password(PASSWORD), receive=("/queue/mallory",)),
        },
    )
    return path


def _config(users_file: Path) -> BrokerConfig:
    return BrokerConfig(
        stomp_users=users_file,
        max_destination_messages=12,
        max_pending_messages=30,
        max_redeliveries=2,
    )


@dataclass(frozen=True)
class Node:
    """The module's real node: where its STOMP listener is, its share, and what it says."""

    process: NodeProcess
    address: tuple[str, int]
    share: Path

    def broker_figure(self, name: str) -> int:
        status = httpx.get(f"http://127.0.0.1:{self.process.port}/status", timeout=5).json()
        return int(status["broker"][name])

    def log(self) -> str:
        return self.process.log()


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory, users_file: Path) -> Iterator[Node]:
    share = tmp_path_factory.mktemp("share")
    logs = tmp_path_factory.mktemp("logs")
    group = Group(share=share, log_dir=logs)
    config = _config(users_file)
    port = free_port()
    try:
        process = group.start(
            "n1",
            "--stomp", f"127.0.0.1:{port}",
            "--stomp-users", str(users_file),
            "--max-destination-messages", str(config.max_destination_messages),
            "--max-pending-messages", str(config.max_pending_messages),
            "--max-redeliveries", str(config.max_redeliveries),
            "--max-message-size", str(MAX_MESSAGE_SIZE),
        )  # fmt: skip
        group.wait_for_master()
        yield Node(process, ("127.0.0.1", port), share)
    finally:
        group.close()


def _client(master: Node | object, login: str) -> StompPy:
    return StompPy(master.address, login=login, passcode=PASSWORD)  # type: ignore[attr-defined]


def _error(client: StompPy) -> str:
    """The ERROR the broker sent: its message header (code and title) and its body."""
    eventually(lambda: bool(client.listener.errors), "the ERROR")
    frame = client.listener.errors[0]
    return f"{frame.headers['message']}\n{frame.body}"


# ---- 1: nobody can send another sender's message ids first ---------------------------


def test_a_sender_cannot_make_the_brokers_ids_of_another_vanish(master: Node) -> None:
    # The attack of issue 27: ids the broker made were ID:<node>-<epoch>-<session>-<counter>;
    # mallory learns her session and the counter from a message of her own and sends the
    # ids alice's next SENDs would get. Alice's SENDs were then receipted as resends and
    # never stored.
    queue = "/queue/mallory"
    reader = _client(master, "mallory")
    reader.subscribe(queue, "s")
    mallory = _client(master, "mallory")
    alice = _client(master, "alice")  # the session after mallory's
    assert mallory.send(queue, "probe")
    probe_id = reader.message().headers["message-id"]
    head, _, counter = probe_id.rpartition("-")
    stem, _, session = head.rpartition("-")
    if counter.isdigit() and session.isdigit():
        guesses = [f"{stem}-{int(session) + 1}-{int(counter) + k}" for k in range(1, 6)]
    else:  # nothing to count on: guess from the shape alone
        guesses = [f"{head}-{k}" for k in range(1, 6)]
    for guess in guesses:
        assert mallory.send(queue, "mallory's", **{"message-id": guess})
    for number in range(5):
        assert alice.send(queue, f"alice's {number}")  # receipted: alice thinks it stored

    got = sorted(reader.message().body for _ in range(10))
    assert got == [*(f"alice's {n}" for n in range(5)), *["mallory's"] * 5]
    assert reader.no_message()
    for client in (reader, mallory, alice):
        client.close()


def test_a_sender_cannot_make_a_logins_own_ids_vanish(master: Node) -> None:
    queue = "/queue/orders"
    mallory = _client(master, "mallory")
    alice = _client(master, "alice")
    for number in (1, 2, 3):  # alice's ids are easy to guess, and mallory sends them first
        assert mallory.send(queue, f"mallory's {number}", **{"message-id": f"order-{number}"})
    for number in (1, 2, 3):
        assert alice.send(queue, f"alice's {number}", **{"message-id": f"order-{number}"})
    # Alice's own resend is still a resend: receipted, not stored again.
    dropped = master.broker_figure("duplicates_dropped")
    assert alice.send(queue, "alice's 1 again", **{"message-id": "order-1"})
    # /status publishes the broker's figures a moment later.
    eventually(lambda: master.broker_figure("duplicates_dropped") == dropped + 1, "one dropped")

    alice.subscribe(queue, "s", ack="client-individual")
    received = [alice.message() for _ in range(6)]
    assert alice.no_message()
    # Consumers see the id each sender gave, whoever sent it.
    assert sorted((m.body, m.headers["message-id"]) for m in received) == sorted(
        (f"{who}'s {n}", f"order-{n}") for who in ("alice", "mallory") for n in (1, 2, 3)
    )
    for message in received:
        assert alice.frame_with_receipt("ack", message.headers["ack"])
    alice.close()
    mallory.close()


def test_a_stomp_1_1_consumer_acknowledges_by_the_id_it_was_shown(master: Node) -> None:
    # STOMP 1.0 and 1.1 name the message an ACK settles by its message-id: the client's
    # own, not the journal's <login>/<id>.
    alice = _client(master, "alice")
    assert alice.send("/queue/legacy", "x", **{"message-id": "l1"})
    alice.close()
    consumer = stomp.Connection11([master.address], heartbeats=(0, 0))
    listener = Collector()
    consumer.set_listener("collector", listener)
    consumer.connect("alice", PASSWORD, wait=True)
    consumer.subscribe("/queue/legacy", "s", ack="client")
    message = listener.messages.get(timeout=10)
    assert message.headers["message-id"] == "l1"
    consumer.ack("l1", "s", receipt="r1")
    assert listener.wait_receipt("r1")
    eventually(
        lambda: "/queue/legacy" not in stored_state(master.share).pending, "the ACK journaled"
    )
    consumer.disconnect()


def test_after_failover_a_logins_resend_is_dropped_and_another_logins_id_is_not(
    masters: Masters, users_file: Path
) -> None:
    # The new master rebuilds its dedupe window from the journal: the scope must be there.
    config = _config(users_file)
    old = masters.start(config)
    alice = _client(old, "alice")
    assert alice.send("/queue/a", "first", **{"message-id": "m1"})
    alice.close()
    new = masters.failover(old, config=config)
    mallory = _client(new, "mallory")
    assert mallory.send("/queue/a", "mallory's", **{"message-id": "m2"})
    alice = _client(new, "alice")
    assert alice.send("/queue/a", "first again", **{"message-id": "m1"})  # the resend
    assert alice.send("/queue/a", "second", **{"message-id": "m2"})
    assert new.service.stats()["duplicates_dropped"] == 1

    alice.subscribe("/queue/a", "s")
    received = sorted((m.body, m.headers["message-id"]) for m in [alice.message() for _ in "123"])
    assert received == [("first", "m1"), ("mallory's", "m2"), ("second", "m2")]
    assert alice.no_message()
    alice.close()
    mallory.close()


# ---- 8: a transaction gets no more room than its SENDs one by one --------------------


def test_a_commit_beyond_the_message_limits_is_refused_and_stores_nothing(
    master: Node,
) -> None:
    producer = _client(master, "alice")
    for attempt in ("fits", "fits again"):  # the second: a client resending after a failover
        producer.connection.begin(attempt)
        for number in range(12):  # exactly max_destination_messages
            headers = {"message-id": f"fits-{number}"}
            producer.connection.send(
                "/queue/tx", f"{attempt} {number}", transaction=attempt, headers=headers
            )
        assert producer.frame_with_receipt("commit", attempt)  # resends need no room
    # Nor does a lone resend, though the destination is full.
    assert producer.send("/queue/tx", "fits 0", **{"message-id": "fits-0", "if-full": "error"})

    producer.connection.begin("t1")
    for number in range(13):  # each SEND alone would fit the empty destination
        producer.connection.send("/queue/tx.one", f"m{number}", transaction="t1")
    assert not producer.frame_with_receipt("commit", "t1")
    error = _error(producer)
    assert error.startswith(codes.title(codes.TRANSACTION_FULL))
    assert "max_destination_messages 12" in error and "nothing of it was stored" in error
    producer.close()

    producer = _client(master, "alice")  # the ERROR closed the first connection
    producer.connection.begin("t2")
    for destination in ("/queue/tx.a", "/queue/tx.b", "/queue/tx.c"):
        for number in range(11):  # 33 in all: each destination fits, the broker does not
            producer.connection.send(destination, f"m{number}", transaction="t2")
    assert not producer.frame_with_receipt("commit", "t2")
    assert "max_pending_messages 30" in _error(producer)
    producer.close()

    pending = stored_state(master.share).pending
    assert sorted(pending) == ["/queue/tx"], "a refused transaction stored something"
    consumer = _client(master, "alice")
    for destination in ("/queue/tx.one", "/queue/tx.a"):
        consumer.subscribe(destination, destination)
    consumer.subscribe("/queue/tx", "tx")
    assert sorted(consumer.message().body for _ in range(12)) == sorted(
        f"fits {number}" for number in range(12)
    )
    assert consumer.no_message()
    consumer.close()


# ---- 11: a poison message that cannot move to a DLQ is not redelivered for ever ------


def _nack_deliveries(consumer: StompPy, count: int) -> list[str]:
    bodies = []
    for _ in range(count):
        message = consumer.message()
        bodies.append(message.body)
        assert consumer.frame_with_receipt("nack", message.headers["ack"])
    return bodies


def _held_back_lines(master: Node, message_id: str) -> list[str]:
    """The node's log lines saying it held ``message_id`` back, once there is one."""
    found: list[str] = []

    def logged() -> bool:
        found[:] = [
            line
            for line in master.log().splitlines()
            if codes.MESSAGE_HELD_BACK in line and repr(message_id) in line
        ]
        return bool(found)

    eventually(logged, f"the log line holding {message_id} back")
    return found


def test_a_poison_message_on_a_dead_letter_queue_is_held_back(master: Node) -> None:
    producer = _client(master, "alice")
    assert producer.send("/queue/poison", "poison", **{"message-id": "p1"})
    consumer = _client(master, "alice")
    consumer.subscribe("/queue/poison", "s", ack="client-individual")
    assert _nack_deliveries(consumer, 3) == ["poison"] * 3  # then it moves to the DLQ
    consumer.subscribe("/queue/DLQ.poison", "d", ack="client-individual")
    assert _nack_deliveries(consumer, 3) == ["poison"] * 3
    assert consumer.no_message(), "the DLQ redelivered its poison message again"

    [line] = _held_back_lines(master, "p1")
    assert "came back unacknowledged 3 times on a dead-letter queue" in line
    # Still stored: the next master delivers it again.
    assert "alice/p1" in stored_state(master.share).pending["/queue/DLQ.poison"]
    consumer.close()
    producer.close()


def test_a_message_too_large_for_its_dead_letter_queue_is_held_back(master: Node) -> None:
    # The DLQ copy carries two headers more: a message near max_message_size fits its
    # queue and not its DLQ.
    headers = {"message-id": "big-1"}
    size = fmt.EncodedRecord(
        fmt.RecordType.SEND, 0, b"/queue/big", b"alice/big-1", payloads.encode_headers(headers), b""
    ).encoded_len
    body = b"x" * (MAX_MESSAGE_SIZE - size)
    producer = _client(master, "alice")
    assert producer.send("/queue/big", body, **headers)
    consumer = _client(master, "alice")
    consumer.subscribe("/queue/big", "s", ack="client-individual")
    assert len(_nack_deliveries(consumer, 3)) == 3
    assert consumer.no_message(), "the message was redelivered again"

    [line] = _held_back_lines(master, "big-1")
    assert "cannot move to /queue/DLQ.big" in line and "max_message_size" in line
    assert "'big-1'" not in "".join(
        line for line in master.log().splitlines() if codes.DEAD_LETTERED in line
    )
    assert "alice/big-1" in stored_state(master.share).pending["/queue/big"]
    consumer.close()
    producer.close()


# ---- 15: a raw CR in a header -----------------------------------------------------


def test_a_raw_carriage_return_in_a_header_is_refused(master: Node) -> None:
    # STOMP 1.1 has no escape for CR, so stomp.py's 1.1 client writes it as it is; STOMP
    # 1.2 allows a CR on the wire only before the LF that ends a line. It reached
    # consumers as U+FFFD.
    producer = stomp.Connection11([master.address], heartbeats=(0, 0))
    listener = Collector()
    producer.set_listener("collector", listener)
    producer.connect("alice", PASSWORD, wait=True)
    producer.send("/queue/cr", "x", headers={"note": "one\rtwo", "receipt": "r1"})
    assert not listener.wait_receipt("r1")
    [error] = listener.errors
    assert error.headers["message"] == codes.title(codes.MALFORMED_FRAME)
    assert "carriage return" in error.body
    eventually(listener.disconnected.is_set, "the broker to close the connection")

    assert "/queue/cr" not in stored_state(master.share).pending
    consumer = _client(master, "alice")
    consumer.subscribe("/queue/cr", "s")
    assert consumer.no_message()
    consumer.close()
