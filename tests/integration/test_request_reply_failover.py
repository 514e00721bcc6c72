"""Request/reply and expiry through a SIGKILL failover of real supervisors, with stock stomp.py.

A requester's temporary queue dies with the master that held its connection: the reply
waiting in it (receipted, journaled) is settled by the new master, not delivered to anyone,
and a reply sent afterwards to the old name is receipted and dropped. A new connection's
round trip works on the new master. A message that expired while the group failed over is
not delivered by the new master; a persistent one is in its dead-letter queue.
"""

from __future__ import annotations

import json
import signal
import urllib.request
from typing import Any

import pytest

from primacy.broker.expiry import now_ms
from tests.broker.nodes import eventually, stored_state
from tests.broker.stomppy import StompPy
from tests.harness.group import Group
from tests.harness.traffic import StompGroup

pytestmark = pytest.mark.slow


def _broker_status(port: int) -> dict[str, Any]:
    """The broker's figures in ``/status`` (none until the snapshot after it started)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as answer:
        return dict(json.load(answer)["broker"] or {})


def _figure(port: int, name: str) -> int | None:
    return _broker_status(port).get(name)


def _round_trip(address: tuple[str, int], body: str) -> tuple[str, str]:
    """One request and its reply on a fresh requester and replier; (reply-to, reply body)."""
    requester, replier = StompPy(address), StompPy(address)
    try:
        requester.subscribe("/temp-queue/replies", "replies")
        replier.subscribe("/queue/requests", "work")
        assert requester.send("/queue/requests", body, **{"reply-to": "/temp-queue/replies"})
        reply_to = str(replier.message().headers["reply-to"])
        assert replier.send(reply_to, f"re: {body}")
        return reply_to, str(requester.message().body)
    finally:
        requester.close()
        replier.close()


def test_temporary_queues_and_expiry_through_a_sigkill_failover(group: Group, share: Any) -> None:
    stomp = StompGroup(group.start, 2)
    old = group.wait_for_master(timeout_s=30)
    old_address = ("127.0.0.1", stomp.stomp.ports[old.node_id])
    assert _round_trip(old_address, "before")[1] == "re: before"

    # A reply waits, receipted, in a requester's temporary queue when the master dies.
    requester, replier = StompPy(old_address), StompPy(old_address)
    replier.subscribe("/queue/requests", "work")
    assert requester.send("/queue/requests", "pending", **{"reply-to": "/temp-queue/later"})
    reply_to = str(replier.message().headers["reply-to"])
    assert replier.send(reply_to, "waiting in the temporary queue")
    # And two messages that expire while the group fails over.
    expires = str(now_ms() + 1500)
    assert replier.send("/queue/expiring", "dropped", expires=expires)
    assert replier.send("/queue/expiring", "audited", expires=expires, persistent="true")

    old.signal(signal.SIGKILL)
    new = group.wait_for_master(timeout_s=30, exclude={old.node_id})
    new_address = ("127.0.0.1", stomp.stomp.ports[new.node_id])

    def temp_pending() -> list[str]:
        pending = stored_state(share).pending
        return [d for d, held in pending.items() if d.startswith("/remote-temp-queue/") and held]

    eventually(lambda: temp_pending() == [], "the old temporary queue's reply settled")
    late = StompPy(new_address)
    assert late.send(reply_to, "a late reply to a requester that is gone")
    eventually(lambda: _figure(new.port, "temp_queue_sends_dropped") == 1, "the drop counted")
    assert temp_pending() == []
    reply_to_now, reply = _round_trip(new_address, "after")
    assert reply == "re: after" and reply_to_now != reply_to

    eventually(lambda: now_ms() > int(expires), "the expiry passing", timeout_s=10)
    late.subscribe("/queue/expiring", "s")
    assert late.send("/queue/expiring", "marker")
    assert late.message().body == "marker"  # neither expired message came first
    eventually(lambda: _figure(new.port, "messages_expired") == 2, "both counted")
    late.subscribe("/queue/DLQ.expiring", "dlq")
    assert late.message().body == "audited"
    late.close()
    for client in (requester, replier):
        client.close()
