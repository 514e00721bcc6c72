"""The same STOMP traffic on each event loop the broker runs on (``stomp_event_loop``):
uvloop, the default where it is installed, and asyncio's own, where it is not. Stock
stomp.py clients against a real journal: receipts, deliveries, acks and nacks, TLS, many
producers at once (group commit and inline commits mixed), and a fenced master. A TLS
listener runs on asyncio's loop whatever the setting (broker/event_loop.py says why)."""

from __future__ import annotations

import threading

import pytest

from primacy.broker.config import BrokerConfig
from primacy.broker.event_loop import (
    ENVIRONMENT_VARIABLE,
    EventLoopChoice,
    loop_kind,
    new_event_loop,
    uvloop_installed,
)
from primacy.share.posix import PosixShare
from primacy.share.records import EpochRecord
from tests.broker.nodes import Masters, eventually, stored_state
from tests.broker.stomppy import StompPy
from tests.harness.tls_certs import Pki, make_pki

LOOPS: list[EventLoopChoice] = ["asyncio", "uvloop"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_auto_is_uvloop_where_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    # uvloop is a dependency (setup.cfg) wherever a wheel installs; auto takes it.
    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)  # a suite run on asyncio sets it
    assert uvloop_installed()
    loop = new_event_loop("auto")
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()
    assert BrokerConfig().stomp_event_loop == "auto"


@pytest.mark.parametrize("named", LOOPS)
def test_the_environment_variable_picks_what_auto_runs(
    masters: Masters, monkeypatch: pytest.MonkeyPatch, named: EventLoopChoice
) -> None:
    """``PRIMACY_STOMP_EVENT_LOOP`` (how the whole suite runs on asyncio): the default
    ``auto`` runs the loop it names; an explicit setting wins over it."""
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, named)
    master = masters.start(BrokerConfig())
    assert master.service.loop_kind == named
    other: EventLoopChoice = "uvloop" if named == "asyncio" else "asyncio"
    loop = new_event_loop(other)
    try:
        assert loop_kind(loop) == other
    finally:
        loop.close()


def test_a_misspelt_environment_variable_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "uv-loop")
    with pytest.raises(ValueError, match="uv-loop"):
        new_event_loop("auto")


@pytest.mark.parametrize("choice", LOOPS)
def test_sends_deliveries_acks_and_nacks(masters: Masters, choice: EventLoopChoice) -> None:
    master = masters.start(BrokerConfig(stomp_event_loop=choice))
    assert master.service.loop_kind == choice
    producer, consumer = StompPy(master.address), StompPy(master.address)
    for n in range(3):
        assert producer.send("/queue/a", f"m{n}", **{"message-id": f"m-{n}"})
    assert producer.send("/queue/a", "again", **{"message-id": "m-0"})  # a resend: dropped
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    first = consumer.message()
    assert consumer.frame_with_receipt("nack", first.headers["ack"])
    seen = [consumer.message() for _ in range(3)]  # the nacked one comes again
    assert sorted(m.headers["message-id"] for m in seen) == ["m-0", "m-1", "m-2"]
    for message in seen:
        assert consumer.frame_with_receipt("ack", message.headers["ack"])
    assert consumer.no_message()
    eventually(lambda: stored_state(masters.share).pending.get("/queue/a", {}) == {}, "acks")
    producer.close()
    consumer.close()


@pytest.mark.parametrize("choice", LOOPS)
def test_eight_producers_at_once_are_all_receipted_and_stored(
    masters: Masters, choice: EventLoopChoice
) -> None:
    master = masters.start(BrokerConfig(stomp_event_loop=choice))
    producers = [StompPy(master.address) for _ in range(8)]
    failures: list[str] = []

    def send_all(slot: int) -> None:
        for n in range(40):
            if not producers[slot].send("/queue/b", "x" * 1024, **{"message-id": f"{slot}-{n}"}):
                failures.append(f"{slot}-{n}")

    threads = [threading.Thread(target=send_all, args=(slot,)) for slot in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(stored_state(masters.share).pending["/queue/b"]) == 320
    for producer in producers:
        producer.close()


@pytest.mark.parametrize("choice", LOOPS)
def test_a_tls_listener_runs_on_the_loop_chosen(
    masters: Masters, pki: Pki, choice: EventLoopChoice
) -> None:
    # Once on asyncio whatever the choice; tests/broker/test_tls.py runs on both loops.
    config = BrokerConfig(stomp_event_loop=choice, stomp_tls_cert=pki.cert, stomp_tls_key=pki.key)
    master = masters.start(config)
    assert master.service.loop_kind == choice
    client = StompPy(master.address, tls={"ca_certs": str(pki.ca)})
    assert client.send("/queue/secret", "over TLS")
    client.subscribe("/queue/secret", "s")
    assert client.message().body == "over TLS"
    client.close()


@pytest.mark.parametrize("choice", LOOPS)
def test_a_fenced_master_sends_no_receipt_and_stops(
    masters: Masters, choice: EventLoopChoice
) -> None:
    master = masters.start(BrokerConfig(stomp_event_loop=choice))
    producer = StompPy(master.address)
    assert producer.send("/queue/a", "before", **{"message-id": "m-0"})
    PosixShare(masters.share).claim_epoch(EpochRecord(0, node_id="node-b"))
    assert not producer.send("/queue/a", "after", **{"message-id": "m-1"})
    assert len(producer.listener.receipts) == 1
    assert producer.listener.disconnected.wait(5)
    eventually(lambda: master.fatal != [], "on_fatal is called")
    assert "JournalFenced" in master.fatal[0]
