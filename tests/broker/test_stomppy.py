"""The third-party stomp.py client against a BrokerService over a real journal."""

from __future__ import annotations

from primacy.store import tools
from tests.broker.nodes import Masters, eventually, stored_state
from tests.broker.stomppy import StompPy


def pending_ids(masters: Masters, destination: str = "/queue/a") -> list[str]:
    return list(stored_state(masters.share).pending.get(destination, {}))


def test_send_with_receipt_is_in_the_journal_under_its_message_id(masters: Masters) -> None:
    master = masters.start()
    client = StompPy(master.address)
    assert client.send("/queue/a", "hello", **{"message-id": "m-1", "colour": "blue"})
    assert pending_ids(masters) == ["m-1"]
    record = master.store.read_message(stored_state(masters.share).pending["/queue/a"]["m-1"])
    assert record.payload == b"hello"
    assert record.headers["colour"] == "blue"
    client.close()


def test_auto_ack_delivers_and_journals_the_ack(masters: Masters) -> None:
    master = masters.start()
    producer, consumer = StompPy(master.address), StompPy(master.address)
    assert producer.send("/queue/a", "one", **{"message-id": "m-1"})
    consumer.subscribe("/queue/a", "s1", ack="auto")
    message = consumer.message()
    assert message.body == "one"
    assert message.headers["message-id"] == "m-1"
    assert message.headers["subscription"] == "s1"
    assert "redelivered" not in message.headers
    eventually(lambda: pending_ids(masters) == [], "the auto ack is journaled")
    producer.close()
    consumer.close()


def test_client_individual_acks_one_message_only(masters: Masters) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    for n in (1, 2):
        assert producer.send("/queue/a", f"m{n}", **{"message-id": f"m-{n}"})
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    first, second = consumer.message(), consumer.message()
    assert consumer.frame_with_receipt("ack", second.headers["ack"])
    assert pending_ids(masters) == ["m-1"]
    consumer.close()
    # The unacknowledged one goes to the next consumer, marked redelivered.
    other = StompPy(master.address)
    other.subscribe("/queue/a", "s2", ack="client-individual")
    again = other.message()
    assert again.headers["message-id"] == first.headers["message-id"] == "m-1"
    assert again.headers["redelivered"] == "true"
    assert other.no_message()
    producer.close()
    other.close()


def test_client_ack_is_cumulative(masters: Masters) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    for n in (1, 2, 3):
        assert producer.send("/queue/a", f"m{n}", **{"message-id": f"m-{n}"})
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s1", ack="client")
    messages = [consumer.message() for _ in range(3)]
    assert consumer.frame_with_receipt("ack", messages[1].headers["ack"])
    assert pending_ids(masters) == ["m-3"]
    producer.close()
    consumer.close()


def test_nack_redelivers_marked_redelivered(masters: Masters) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    assert producer.send("/queue/a", "x", **{"message-id": "m-1"})
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    first = consumer.message()
    assert consumer.frame_with_receipt("nack", first.headers["ack"])
    again = consumer.message()
    assert again.headers["message-id"] == "m-1"
    assert again.headers["redelivered"] == "true"
    assert pending_ids(masters) == ["m-1"]
    producer.close()
    consumer.close()


def test_a_committed_transaction_stores_its_sends_an_aborted_one_nothing(masters: Masters) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    producer.connection.begin("t1")
    producer.connection.send("/queue/a", "a", headers={"transaction": "t1", "message-id": "t-1"})
    producer.connection.send("/queue/a", "b", headers={"transaction": "t1", "message-id": "t-2"})
    assert consumer.no_message()
    assert pending_ids(masters) == []
    assert producer.frame_with_receipt("commit", "t1")
    assert pending_ids(masters) == ["t-1", "t-2"]
    assert [consumer.message().body for _ in range(2)] == ["a", "b"]
    producer.connection.begin("t2")
    producer.connection.send("/queue/a", "c", headers={"transaction": "t2", "message-id": "t-3"})
    assert producer.frame_with_receipt("abort", "t2")
    assert consumer.no_message()
    assert pending_ids(masters) == ["t-1", "t-2"]
    producer.close()
    consumer.close()


def test_acks_in_a_transaction_count_only_on_commit(masters: Masters) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    for n in (1, 2):
        assert producer.send("/queue/a", f"m{n}", **{"message-id": f"m-{n}"})
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    first, second = consumer.message(), consumer.message()
    consumer.connection.begin("t1")
    consumer.connection.ack(first.headers["ack"], transaction="t1")
    assert consumer.frame_with_receipt("abort", "t1")
    consumer.connection.begin("t2")
    consumer.connection.ack(second.headers["ack"], transaction="t2")
    assert pending_ids(masters) == ["m-1", "m-2"]
    assert consumer.frame_with_receipt("commit", "t2")
    assert pending_ids(masters) == ["m-1"]
    producer.close()
    consumer.close()


def test_a_resend_with_the_same_message_id_is_receipted_but_stored_once(masters: Masters) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    assert producer.send("/queue/a", "x", **{"message-id": "m-1"})
    assert producer.send("/queue/a", "x", **{"message-id": "m-1"})
    state = stored_state(masters.share)
    assert list(state.pending["/queue/a"]) == ["m-1"]
    assert master.service.stats()["duplicates_dropped"] == 1
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s1")
    assert consumer.message().headers["message-id"] == "m-1"
    assert consumer.no_message()
    producer.close()
    consumer.close()


def test_the_same_message_id_on_another_destination_is_another_message(
    masters: Masters,
) -> None:
    old = masters.start()
    producer = StompPy(old.address)
    assert producer.send("/queue/a", "x", **{"message-id": "m-1"})
    assert producer.send("/queue/b", "y", **{"message-id": "m-1"})
    consumer = StompPy(old.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    first = consumer.message()
    assert consumer.frame_with_receipt("ack", first.headers["ack"])
    consumer.close()
    producer.close()
    # After a failover the acked /queue/a copy is only a dedupe entry; /queue/c is still new.
    new = masters.failover(old)
    producer = StompPy(new.address)
    assert producer.send("/queue/c", "z", **{"message-id": "m-1"})
    assert producer.send("/queue/a", "x", **{"message-id": "m-1"})  # a resend: dropped
    assert new.service.stats()["duplicates_dropped"] == 1
    pending = stored_state(masters.share).pending
    assert {destination: list(ids) for destination, ids in pending.items()} == {
        "/queue/b": ["m-1"],
        "/queue/c": ["m-1"],
    }
    for destination, body in (("/queue/b", "y"), ("/queue/c", "z")):
        consumer = StompPy(new.address)
        consumer.subscribe(destination, "s1")
        assert consumer.message().body == body
        consumer.close()
    producer.close()


def test_a_send_without_message_id_gets_one_from_the_broker(masters: Masters) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    assert producer.send("/queue/a", "x")
    [stored] = pending_ids(masters)
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s1")
    assert consumer.message().headers["message-id"] == stored
    assert stored.startswith(f"ID:node-a-{master.store.epoch}-")
    producer.close()
    consumer.close()


def test_after_failover_unacked_messages_are_redelivered_and_resends_dropped(
    masters: Masters,
) -> None:
    old = masters.start()
    producer = StompPy(old.address)
    for n in (1, 2, 3):
        assert producer.send("/queue/a", f"m{n}", **{"message-id": f"m-{n}"})
    consumer = StompPy(old.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    delivered = [consumer.message() for _ in range(3)]
    assert consumer.frame_with_receipt("ack", delivered[0].headers["ack"])

    new = masters.failover(old)
    assert new.store.epoch > old.store.epoch
    producer = StompPy(new.address)
    assert producer.send("/queue/a", "m3", **{"message-id": "m-3"})  # a resend: dropped
    consumer = StompPy(new.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    again = [consumer.message() for _ in range(2)]
    assert [m.headers["message-id"] for m in again] == ["m-2", "m-3"]
    assert all(m.headers["redelivered"] == "true" for m in again)
    assert [m.body for m in again] == ["m2", "m3"]
    assert consumer.no_message()
    assert pending_ids(masters) == ["m-2", "m-3"]
    producer.close()
    consumer.close()


def test_every_delivery_is_journaled_for_the_replay_redeliveries_included(
    masters: Masters,
) -> None:
    old = masters.start()
    producer = StompPy(old.address)
    for n in (1, 2):
        assert producer.send("/queue/a", f"m{n}", **{"message-id": f"m-{n}"})
    consumer = StompPy(old.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    first = [consumer.message() for _ in range(2)]
    assert consumer.frame_with_receipt("nack", first[0].headers["ack"])
    again = consumer.message()
    assert again.headers["message-id"] == "m-1"
    assert consumer.frame_with_receipt("ack", again.headers["ack"])
    new = masters.failover(old)  # m-2 was delivered once and never acknowledged
    consumer = StompPy(new.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    assert consumer.message().headers["message-id"] == "m-2"
    consumer.close()
    producer.close()
    new.stop()

    records: list[dict[str, object]] = []
    tools.dump(masters.share, records.append)
    deliveries = [(r["epoch"], r["message_id"]) for r in records if r["type"] == "DELIVER"]
    epochs = (old.store.epoch, new.store.epoch)
    assert sorted(deliveries) == sorted(
        [(epochs[0], "m-1"), (epochs[0], "m-2"), (epochs[0], "m-1"), (epochs[1], "m-2")]
    )
    # Queued before its ACK, so the journal never shows an ack of an undelivered message.
    [ack] = [r for r in records if r["type"] == "ACK"]
    assert any(
        r["type"] == "DELIVER" and r["message_id"] == "m-1" and r["sequence"] < ack["sequence"]
        for r in records
    )
