"""A resend of a message still pending is dropped even after its id left the dedupe window.

The window bounds how long an *acknowledged* id is remembered; a pending one is
held anyway. Storing a second copy would leave the journal's state with one
entry for two stored copies: an ACK of the first would settle the second, and
the first copy's segment would count as holding a pending message forever, so
retention could never remove it (found while exposing the window as a setting).
"""

from __future__ import annotations

import threading
from pathlib import Path

from primacy.store.config import StoreConfig
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from primacy.store.state import SEQUENCE
from tests.broker.nodes import Masters, stored_state
from tests.broker.stomppy import StompPy

WINDOW = 2


def test_a_pending_message_resent_after_leaving_the_window_is_stored_once(
    masters: Masters,
) -> None:
    master = masters.start(dedupe_window_messages=WINDOW)
    producer = StompPy(master.address)
    for index in range(4):  # m0 leaves the window of 2
        assert producer.send("/queue/a", f"m{index}", **{"message-id": f"m{index}"})
    assert producer.send("/queue/a", "m0 again", **{"message-id": "m0"})  # receipted
    assert master.service.stats()["duplicates_dropped"] == 1

    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    received = [consumer.message() for _ in range(4)]
    assert [m.body for m in received] == ["m0", "m1", "m2", "m3"]
    assert consumer.no_message(wait_s=0.5), "the resend was stored as a second message"
    for message in received:
        assert consumer.frame_with_receipt("ack", message.headers["ack"])

    state = stored_state(masters.share)
    assert state.pending == {}
    assert dict(state.pending_by_segment) == {}  # nothing left pinning a segment
    consumer.close()

    # Acknowledged and out of the window: the id is free again, a new message.
    assert producer.send("/queue/a", "m0 later", **{"message-id": "m0"})
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s2")
    assert consumer.message().body == "m0 later"
    assert consumer.no_message()
    consumer.close()
    producer.close()


def test_after_failover_a_pending_id_outside_the_window_is_still_dropped(
    masters: Masters,
) -> None:
    old = masters.start(dedupe_window_messages=WINDOW)
    producer = StompPy(old.address)
    for index in range(4):
        assert producer.send("/queue/a", f"m{index}", **{"message-id": f"m{index}"})
    producer.close()
    new = masters.failover(old, dedupe_window_messages=WINDOW)
    producer = StompPy(new.address)
    assert producer.send("/queue/a", "m0 again", **{"message-id": "m0"})
    assert new.service.stats()["duplicates_dropped"] == 1
    producer.close()
    consumer = StompPy(new.address)
    consumer.subscribe("/queue/a", "s1")
    assert sorted(consumer.message().body for _ in range(4)) == ["m0", "m1", "m2", "m3"]
    assert consumer.no_message(wait_s=0.5)
    consumer.close()


def test_the_journal_keeps_the_first_copy_of_a_pending_id(tmp_path: Path) -> None:
    # The journal's own state, whoever writes to it: recovery must agree with the
    # live state and keep exactly one pending entry per (destination, id).
    config = StoreConfig(share=tmp_path, node_id="n", dedupe_window_messages=WINDOW)
    store = JournalStore.open(config, epoch=1, fencing_check=lambda: None)
    first = store.append_send("/queue/a", "m0", b"first").result()
    for index in range(1, 4):
        store.append_send("/queue/a", f"m{index}", b"x").result()
    store.append_send("/queue/a", "m0", b"second").result()
    store.append_ack("/queue/a", "m0").result()
    store.close()
    state = recover(tmp_path / "journal", dedupe_window_messages=WINDOW).state
    assert sorted(state.pending["/queue/a"]) == ["m1", "m2", "m3"]
    assert sum(state.pending_by_segment.values()) == 3
    assert first < state.pending["/queue/a"]["m1"][SEQUENCE]


def test_a_send_submitted_and_not_yet_committed_is_already_a_duplicate(tmp_path: Path) -> None:
    # The broker asks the journal before it submits; the journal's window counts a SEND
    # only once its batch commits, so the sends in between must count too, or a resend
    # arriving then would be stored twice. The commit is held in its fencing check.
    checking, go_on = threading.Event(), threading.Event()
    hold = False

    def fencing_check() -> None:
        if hold:
            checking.set()
            assert go_on.wait(10)

    config = StoreConfig(share=tmp_path, node_id="n", dedupe_window_messages=WINDOW)
    store = JournalStore.open(config, epoch=1, fencing_check=fencing_check)
    try:
        assert not store.is_duplicate("/queue/a", "m1")
        hold = True
        written = store.append_send("/queue/a", "m1", b"x")
        assert checking.wait(10), "the batch never reached its fencing check"
        assert not written.done() and store.stats().pending_messages == 0
        assert store.is_duplicate("/queue/a", "m1")
        assert not store.is_duplicate("/queue/b", "m1")  # ids are per destination
        go_on.set()
        written.result(10)
        assert store.is_duplicate("/queue/a", "m1")
        assert store.stats().pending_messages == 1
    finally:
        go_on.set()
        store.close()
