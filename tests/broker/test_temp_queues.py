"""Request/reply over temporary queues with stock stomp.py: a requester's ``/temp-queue/NAME``
is its own (others may send to it, only it may subscribe), its ``reply-to`` is rewritten to the
name a replier can send to, and the queue is gone with its connection, at a failover too: what
it held is settled in the journal, and a reply sent to it afterwards is receipted and dropped."""

from __future__ import annotations

from primacy.broker.config import BrokerConfig
from tests.broker.nodes import Masters, RawClient, eventually, stored_state
from tests.broker.stomppy import StompPy


def _temp_pending(masters: Masters) -> dict[str, int]:
    pending = stored_state(masters.share).pending
    return {d: len(m) for d, m in pending.items() if d.startswith("/remote-temp-queue/") and m}


def _request(requester: StompPy, replier: StompPy, body: str) -> str:
    """The requester asks on /queue/requests; returns the reply-to the replier sees."""
    assert requester.send(
        "/queue/requests", body, **{"reply-to": "/temp-queue/replies", "correlation-id": body}
    )
    request = replier.message()
    assert request.body == body
    return str(request.headers["reply-to"])


def test_a_request_and_its_reply_round_trip(masters: Masters) -> None:
    master = masters.start()
    requester, replier = StompPy(master.address), StompPy(master.address)
    requester.subscribe("/temp-queue/replies", "replies")
    replier.subscribe("/queue/requests", "work")
    reply_to = _request(requester, replier, "q-1")
    assert reply_to.startswith("/remote-temp-queue/") and reply_to.endswith(".replies")
    assert replier.send(reply_to, "answer to q-1", **{"correlation-id": "q-1"})
    reply = requester.message()
    assert (reply.body, reply.headers["correlation-id"]) == ("answer to q-1", "q-1")
    assert reply.headers["destination"] == "/temp-queue/replies"  # the name it used
    assert master.service.stats()["temp_queues"] == 1
    requester.close()
    replier.close()


def test_only_the_owner_may_subscribe_and_each_connection_has_its_own(masters: Masters) -> None:
    master = masters.start()
    requester, replier = StompPy(master.address), StompPy(master.address)
    replier.subscribe("/queue/requests", "work")
    reply_to = _request(requester, replier, "q-2")
    # Another connection's /temp-queue/replies is its own queue: it sees nothing of this one.
    other = StompPy(master.address)
    other.subscribe("/temp-queue/replies", "mine")
    assert replier.send(reply_to, "for the requester only")
    requester.subscribe("/temp-queue/replies", "replies")
    assert requester.message().body == "for the requester only"
    assert other.listener.messages.empty()
    # Subscribing to the requester's queue by its full name is refused.
    thief = RawClient(master.address)
    thief.connect()
    thief.send("SUBSCRIBE", {"destination": reply_to, "id": "s"})
    error = thief.read()
    assert error.command == "ERROR" and "PRIMACY-1547" in error.body.decode()
    for client in (requester, replier, other):
        client.close()


def test_a_temporary_queue_goes_with_its_connection(masters: Masters) -> None:
    master = masters.start()
    requester, replier = StompPy(master.address), StompPy(master.address)
    replier.subscribe("/queue/requests", "work")
    reply_to = _request(requester, replier, "q-3")
    assert replier.send(reply_to, "unread reply")  # stored: nobody subscribed yet
    assert len(_temp_pending(masters)) == 1
    requester.close()
    eventually(lambda: master.service.stats()["temp_queues"] == 0, "the queue gone")
    eventually(lambda: _temp_pending(masters) == {}, "its message settled in the journal")
    # A late reply is receipted, not stored, and counted.
    assert replier.send(reply_to, "too late")
    assert _temp_pending(masters) == {}
    assert master.service.stats()["temp_queue_sends_dropped"] == 1
    replier.close()


def test_at_failover_temporary_queues_are_gone_and_late_replies_dropped(
    masters: Masters,
) -> None:
    first = masters.start()
    requester, replier = StompPy(first.address), StompPy(first.address)
    replier.subscribe("/queue/requests", "work")
    reply_to = _request(requester, replier, "q-4")
    assert replier.send(reply_to, "receipted before the failover")
    # The master ends with the requester still connected, as a crash ends it: its journal
    # takes nothing more, so the reply is still pending there when the new master recovers.
    first.store.close()
    first.service.stop()
    assert len(_temp_pending(masters)) == 1
    second = masters.start()
    eventually(lambda: _temp_pending(masters) == {}, "the old queue's reply settled")
    assert second.service.stats()["temp_queues"] == 0
    late = StompPy(second.address)
    assert late.send(reply_to, "resent to the new master")
    assert second.service.stats()["temp_queue_sends_dropped"] == 1
    assert _temp_pending(masters) == {}
    late.close()
    for client in (requester, replier):
        client.close()


def test_a_connection_may_hold_only_so_many_temporary_queues(masters: Masters) -> None:
    master = masters.start(BrokerConfig(max_temp_queues_per_connection=2))
    client = RawClient(master.address)
    client.connect()
    for n in (1, 2):
        client.send("SUBSCRIBE", {"destination": f"/temp-queue/t{n}", "id": f"s{n}"})
    client.send("SEND", {"destination": "/queue/x", "reply-to": "/temp-queue/t3"}, b"x")
    error = client.read()
    assert error.command == "ERROR" and "PRIMACY-1546" in error.body.decode()
    assert stored_state(masters.share).pending.get("/queue/x", {}) == {}
