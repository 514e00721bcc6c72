"""Durable topic subscriptions in the journal: what a topic SEND is pending for, what a
checkpoint keeps of them, and journals of format version 1 still opening."""

from __future__ import annotations

import json
from collections.abc import Callable

from primacy.store import format as fmt
from primacy.store.format import RecordType
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from primacy.store.state import DESTINATION, MESSAGE_ID, SEQUENCE, JournalState
from tests.store.segment_edits import rewrite_format_version

TOPIC = "/topic/prices"


def applied(*records: tuple[RecordType, str, str]) -> JournalState:
    state = JournalState(dedupe_window_messages=100)
    for sequence, (kind, destination, message_id) in enumerate(records, 1):
        state.apply(kind, sequence, destination, message_id, f"seg-{sequence // 3}", 8 * sequence)
    return state


def test_a_topic_send_is_pending_once_per_durable_subscription_present() -> None:
    state = applied(
        (RecordType.SEND, TOPIC, "before"),  # nobody durable yet: pending for no one
        (RecordType.SUBSCRIBE, TOPIC, "durable:1:a:x"),
        (RecordType.SUBSCRIBE, TOPIC, "durable:1:b:y"),
        (RecordType.SEND, TOPIC, "m1"),
        (RecordType.SEND, "/topic/other", "m2"),
        (RecordType.ACK, "durable:1:a:x", "m1"),
        (RecordType.SEND, TOPIC, "m1"),  # a resend: dropped, as on a queue
    )
    assert {queue: list(messages) for queue, messages in state.pending.items()} == {
        "durable:1:b:y": ["m1"]
    }
    assert state.pending["durable:1:b:y"]["m1"][SEQUENCE] == 4  # the one SEND record
    assert state.is_duplicate(TOPIC, "m1")
    assert sum(state.pending_by_segment.values()) == 1


def test_unsubscribe_settles_what_the_subscription_held_and_another_topic_starts_afresh() -> None:
    state = applied(
        (RecordType.SUBSCRIBE, TOPIC, "durable:1:a:x"),
        (RecordType.SEND, TOPIC, "m1"),
        (RecordType.SUBSCRIBE, "/topic/other", "durable:1:a:x"),  # moved: m1 goes
        (RecordType.SEND, TOPIC, "m2"),
        (RecordType.SEND, "/topic/other", "m3"),
    )
    assert state.durables == {"/topic/other": {"durable:1:a:x": 3}}
    assert list(state.pending["durable:1:a:x"]) == ["m3"]
    state.apply(RecordType.UNSUBSCRIBE, 6, "/topic/other", "durable:1:a:x", "seg-9", 0)
    assert (state.pending, state.durables, dict(state.pending_by_segment)) == ({}, {}, {})


def test_a_checkpoint_keeps_the_durable_subscriptions() -> None:
    state = applied(
        (RecordType.SUBSCRIBE, TOPIC, "durable:1:a:x"),
        (RecordType.SEND, TOPIC, "m1"),
        (RecordType.SEND, "/queue/q", "m2"),
    )
    again = JournalState.from_json(json.loads(json.dumps(state.to_json())), 100)
    assert again.summary() == state.summary()
    assert again.durables == {TOPIC: {"durable:1:a:x": 1}}
    assert again.pending_by_segment == state.pending_by_segment
    # Without durable subscriptions a checkpoint holds what it held before (no new key).
    assert "durables" not in applied((RecordType.SEND, "/queue/q", "m")).to_json()


def test_a_journal_of_format_version_1_still_opens(
    open_store: Callable[..., JournalStore],
) -> None:
    first = open_store(epoch=1)
    first.append_send("/queue/q", "m1", b"kept").result()
    first.close()
    segments = sorted((first.config.journal_dir).glob("*.seg"))
    assert [fmt.decode_segment_header(s.read_bytes()).format_version for s in segments] == [2]
    rewrite_format_version(segments[0], 1)  # what every release before topics wrote
    recovered = recover(first.config.journal_dir, dedupe_window_messages=100, quarantine=False)
    assert list(recovered.state.pending["/queue/q"]) == ["m1"]
    second = open_store(epoch=2)
    assert second.read_message(second.recovered_pending[0]).payload == b"kept"


def test_the_store_recovers_a_durable_subscription_and_its_messages(
    open_store: Callable[..., JournalStore],
) -> None:
    first = open_store(epoch=1)
    first.append_subscription(TOPIC, "durable:1:a:x", ends=False).result()
    first.append_send(TOPIC, "m1", b"for x").result()
    first.close()
    second = open_store(epoch=2)
    assert second.recovered_durables == {TOPIC: ("durable:1:a:x",)}
    (pending,) = second.recovered_pending
    assert (pending[DESTINATION], pending[MESSAGE_ID]) == ("durable:1:a:x", "m1")
    assert second.read_message(pending).destination == TOPIC
