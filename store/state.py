"""What the journal says is true: messages sent and not yet acknowledged, ids seen, last sequence.

Recovery builds a ``JournalState`` by applying records in sequence order; the
writer keeps one up to date as batches commit, and checkpoints save it. The
broker builds its queues from ``pending`` (in sequence order per destination)
and drops resends that ``is_duplicate``: the same message id to the same
destination, while that pair is in the dedupe window or its first copy is still
pending (not acknowledged), however long ago it was sent.

Topics (format version 2): a SEND to a ``/topic/`` destination is never pending itself; it
becomes pending once for each durable subscription of that topic at its sequence, under the
subscription's queue name (``durables``, kept by SUBSCRIBE and UNSUBSCRIBE records), and each
is acknowledged by an ACK naming that queue. The body stays once in the journal: every copy
points at the one SEND record.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from itertools import chain
from operator import itemgetter, le
from typing import Any, Final

from primacy.store.dedupe_window import DedupeWindow
from primacy.store.format import RecordType

TOPIC_PREFIX = "/topic/"


PendingMessage = tuple[str, str, int, str, int]
"""A SEND not yet acknowledged, and where its record lies (read it with ``read_message``):
(destination, message id, sequence, segment, batch offset), the positions below.

One per unacknowledged message, in the master and in every following slave, so a plain tuple
of strings and integers: the collector stops tracking such a tuple once it survived one
collection, and a backlog of them adds nothing to a full collection's scan. A named tuple or a
slotted dataclass is tracked for its whole life (CPython untracks exact tuples only): with
180 000 messages held, the master's full collections grew to 260 ms, past the lease check's
keepalive (docs/benchmarks.md, "The soak to a million")."""
DESTINATION: Final = 0
MESSAGE_ID: Final = 1
SEQUENCE: Final = 2
SEGMENT: Final = 3
BATCH_OFFSET: Final = 4


class JournalState:
    """The state the records up to ``last_sequence`` describe."""

    def __init__(self, dedupe_window_messages: int) -> None:
        self.dedupe_window_messages = dedupe_window_messages
        self.pending: dict[str, dict[str, PendingMessage]] = {}
        # (destination, message id) -> sequence of its SEND, oldest first: the dedupe window.
        self.seen_messages = DedupeWindow(dedupe_window_messages)
        self.last_sequence = 0
        self.pending_by_segment: Counter[str] = Counter()
        # topic -> {durable subscription's queue name: sequence of its SUBSCRIBE}
        self.durables: dict[str, dict[str, int]] = {}

    def snapshot(self) -> JournalState:
        """This state as it is now, for a checkpoint written on another thread while this one
        goes on changing (store/checkpoint_thread.py). Copies of the containers only, which
        are C loops over pointers: the messages are immutable tuples, shared."""
        copy = JournalState(self.dedupe_window_messages)
        copy.last_sequence = self.last_sequence
        copy.pending = {name: messages.copy() for name, messages in self.pending.items()}
        copy.seen_messages = self.seen_messages.copy()
        copy.pending_by_segment = self.pending_by_segment.copy()
        copy.durables = {topic: queues.copy() for topic, queues in self.durables.items()}
        return copy

    def is_duplicate(self, destination: str, message_id: str) -> bool:
        """True if a SEND of this id to this destination is a resend: in the dedupe window, or
        its first copy is still pending."""
        return (destination, message_id) in self.seen_messages or message_id in self.pending.get(
            destination, ()
        )

    def pending_count(self) -> int:
        return sum(len(messages) for messages in self.pending.values())

    def apply(
        self,
        record_type: RecordType,
        sequence: int,
        destination: str,
        message_id: str,
        segment: str,
        batch_offset: int,
    ) -> None:
        """Apply one record; records must come in increasing sequence order."""
        self.last_sequence = max(self.last_sequence, sequence)
        if record_type is RecordType.SEND:
            if self.is_duplicate(destination, message_id):
                # A resend the broker dropped too: the first copy wins. A copy still pending
                # counts even after its id left the window, so ``pending`` (one entry per
                # id) and ``pending_by_segment`` never lose track of the first copy.
                return
            key = (destination, message_id)
            if destination.startswith(TOPIC_PREFIX):
                for name in self.durables.get(destination) or {}:
                    copy = (name, message_id, sequence, segment, batch_offset)
                    self.pending.setdefault(name, {})[message_id] = copy
                    self.pending_by_segment[segment] += 1
            else:
                message = (destination, message_id, sequence, segment, batch_offset)
                self.pending.setdefault(destination, {})[message_id] = message
                self.pending_by_segment[segment] += 1
            self.seen_messages.add(key, sequence)  # the oldest leaves once it is full
        elif record_type is RecordType.ACK:
            queue = self.pending.get(destination)
            acked = queue.pop(message_id, None) if queue is not None else None
            if acked is not None:
                self._unpend(acked)
            if queue is not None and not queue:
                del self.pending[destination]
        elif record_type is RecordType.SUBSCRIBE:
            if message_id not in (self.durables.get(destination) or {}):
                self._end_durable(message_id)  # one name, one topic: a move starts afresh
                self.durables.setdefault(destination, {})[message_id] = sequence
        elif record_type is RecordType.UNSUBSCRIBE:
            self._end_durable(message_id)

    def _end_durable(self, queue_name: str) -> None:
        """Forget a durable subscription and every message still pending for it."""
        for topic, queues in list(self.durables.items()):
            if queues.pop(queue_name, None) is not None and not queues:
                del self.durables[topic]
        for message in self.pending.pop(queue_name, {}).values():
            self._unpend(message)

    def _unpend(self, message: PendingMessage) -> None:
        segment = message[SEGMENT]
        self.pending_by_segment[segment] -= 1
        if not self.pending_by_segment[segment]:
            del self.pending_by_segment[segment]

    def summary(
        self,
    ) -> tuple[
        int,
        dict[str, list[tuple[str, int]]],
        list[tuple[tuple[str, str], int]],
        dict[str, dict[str, int]],
    ]:
        """A comparable value: last sequence, pending ids per destination, seen ids in order,
        durable subscriptions per topic."""
        pending = {
            destination: [(m[MESSAGE_ID], m[SEQUENCE]) for m in messages.values()]
            for destination, messages in sorted(self.pending.items())
        }
        durables = {topic: dict(sorted(q.items())) for topic, q in sorted(self.durables.items())}
        return self.last_sequence, pending, list(self.seen_messages.items()), durables

    def to_json(self) -> dict[str, Any]:
        """``json_columns`` with every column read into a list: the same JSON value."""
        return _read_columns(self.json_columns())

    def json_columns(self) -> dict[str, Any]:
        """The state as columns (checkpoint version 4): one JSON list per field, names and
        segments as indices into lists of their own, so reading it back makes a few lists
        of strings and numbers instead of a small list per message; a new master reads
        it on the way to serving.

        Each list that grows with the state is an iterator, to be read once and in order, so
        a checkpoint writes it in pieces instead of holding the state twice (issue 30: the
        master kept a whole-state peak as RSS). The state must not change until all are
        read: a checkpoint reads a ``snapshot`` (its containers copied, ~35 bytes a message
        for as long as it is written), which nothing changes."""
        queues = self._queues_in_sequence_order()
        # One list of references in sequence order (8 bytes a message, one block the
        # allocator gives back), read once per column: merging the queues, already in
        # order, is enough, and heapq.merge breaks ties as one stable sort would.
        ordered = list(heapq.merge(*queues, key=_SEQUENCE))
        # Names and segments are numbered in first-use order.
        seen = self.seen_messages
        names = _numbered(chain(map(_DESTINATION, ordered), map(itemgetter(0), seen)))
        segments = _numbered(map(_SEGMENT, ordered))
        columns: dict[str, Any] = {
            "last_sequence": self.last_sequence,
            "dedupe_window_messages": self.dedupe_window_messages,
            "destinations": iter(names),
            "segments": iter(segments),
            "pending": {
                "destination": map(names.__getitem__, map(_DESTINATION, ordered)),
                "message_id": map(_MESSAGE_ID, ordered),
                "sequence": map(_SEQUENCE, ordered),
                "segment": map(segments.__getitem__, map(_SEGMENT, ordered)),
                "batch_offset": map(_BATCH_OFFSET, ordered),
            },
            "seen": {
                "destination": map(names.__getitem__, map(itemgetter(0), seen)),
                "message_id": map(itemgetter(1), seen),
                "sequence": iter(seen.values()),
            },
        }
        if self.durables:  # optional: a checkpoint without it has none (and its old bytes)
            columns["durables"] = {
                "topic": [topic for topic, queues in self.durables.items() for _ in queues],
                "queue": [queue for queues in self.durables.values() for queue in queues],
                "sequence": [seq for queues in self.durables.values() for seq in queues.values()],
            }
        return columns

    def _queues_in_sequence_order(self) -> list[Collection[PendingMessage]]:
        """Each destination's pending messages in sequence order: as they are, since records
        are applied in that order, or sorted if they are not (a foreign checkpoint's)."""
        return [
            queue if _ascending(queue) else sorted(queue, key=_SEQUENCE)
            for queue in (messages.values() for messages in self.pending.values())
            if queue
        ]

    @classmethod
    def from_json(cls, data: dict[str, Any], dedupe_window_messages: int) -> JournalState:
        """Read ``to_json``'s columns, or the rows of checkpoint versions 2 and 3.

        ValueError, KeyError or TypeError for any shape ``to_json`` does not write.
        """
        if "seen" not in data:
            return cls._from_rows(data, dedupe_window_messages)
        state = cls(dedupe_window_messages)
        state.last_sequence = count(data["last_sequence"])
        names = _strings(data["destinations"])
        segments = _strings(data["segments"])
        pending = data["pending"]
        destinations = _lookup(names, pending["destination"])
        in_segments = _lookup(segments, pending["segment"])
        sequences = _integers(pending["sequence"])
        offsets = _integers(pending["batch_offset"])
        for destination, message_id, sequence, segment, offset in zip(
            destinations, _strings(pending["message_id"]), sequences, in_segments, offsets,
            strict=True,
        ):  # fmt: skip
            message = (destination, message_id, sequence, segment, offset)
            state.pending.setdefault(destination, {})[message_id] = message
        state.pending_by_segment.update(in_segments)
        seen = data["seen"]
        keys = zip(_lookup(names, seen["destination"]), _strings(seen["message_id"]), strict=True)
        state.seen_messages = DedupeWindow(
            dedupe_window_messages, zip(keys, _integers(seen["sequence"]), strict=True)
        )  # the newest dedupe_window_messages of them, if the checkpoint's window was larger
        durables = data.get("durables")
        if durables is not None:
            for topic, queue, sequence in zip(
                _strings(durables["topic"]), _strings(durables["queue"]),
                _integers(durables["sequence"]), strict=True,
            ):  # fmt: skip
                state.durables.setdefault(topic, {})[queue] = sequence
        return state

    @classmethod
    def _from_rows(cls, data: dict[str, Any], dedupe_window_messages: int) -> JournalState:
        """Checkpoint versions 2 and 3: a list per pending message and per id of the window."""
        state = cls(dedupe_window_messages)
        state.last_sequence = count(data["last_sequence"])
        for destination, message_id, sequence, segment, offset in data["pending"]:
            message = (destination, message_id, count(sequence), segment, count(offset))
            state.pending.setdefault(destination, {})[message_id] = message
            state.pending_by_segment[segment] += 1
        state.seen_messages = DedupeWindow(
            dedupe_window_messages,
            (
                ((destination, message_id), count(sequence))
                for destination, message_id, sequence in data["seen_messages"]
            ),
        )
        return state


_DESTINATION = itemgetter(DESTINATION)
_MESSAGE_ID = itemgetter(MESSAGE_ID)
_SEQUENCE = itemgetter(SEQUENCE)
_SEGMENT = itemgetter(SEGMENT)
_BATCH_OFFSET = itemgetter(BATCH_OFFSET)


def _ascending(queue: Collection[PendingMessage]) -> bool:
    following = map(_SEQUENCE, queue)
    next(following, None)
    return all(map(le, map(_SEQUENCE, queue), following))  # in C: queues are long


def _numbered(names: Iterable[str]) -> dict[str, int]:
    """Each name's position among ``names`` in first-use order."""
    return {name: position for position, name in enumerate(dict.fromkeys(names))}


def _read_columns(columns: dict[str, Any]) -> dict[str, Any]:
    """``columns`` with each iterator in it (in a dict in it too) read into a list."""
    read = {}
    for key, value in columns.items():
        if isinstance(value, dict):
            value = _read_columns(value)
        elif isinstance(value, Iterator):
            value = list(value)
        read[key] = value
    return read


# Every number a checkpoint holds (a sequence, an offset, a length, an epoch, an index) fits a
# u64 field of the journal with room for one more; the share's epochs stop at the same bound.
MAX_CHECKPOINT_NUMBER = 2**63 - 1


def count(value: object) -> int:
    """A number read from a checkpoint: an integer (a bool is not) from 0 to
    ``MAX_CHECKPOINT_NUMBER``; ValueError for anything else. A CRC-valid checkpoint need not be
    ours, and a last sequence of 10**30 would pass ``int`` and make the new master's first
    write fail at every takeover (issue 27)."""
    if type(value) is not int or not 0 <= value <= MAX_CHECKPOINT_NUMBER:
        raise ValueError(f"{str(value)[:40]} is not a number a checkpoint holds")
    return value


def _strings(column: Any) -> list[str]:
    # set(map(type, ...)) runs in C: a checkpoint's columns hold 100 000 values and more.
    if not isinstance(column, list) or not set(map(type, column)) <= {str}:
        raise TypeError("a column of text holds something else")
    return column


def _integers(column: Any) -> list[int]:
    if not isinstance(column, list) or not set(map(type, column)) <= {int}:
        raise TypeError("a column of numbers holds something else")
    if column and (min(column) < 0 or max(column) > MAX_CHECKPOINT_NUMBER):
        raise ValueError("a column of numbers holds one out of range")
    return column


def _lookup(values: list[str], positions: Any) -> list[str]:
    """Each position's value; a position outside ``values`` (a negative one included) is an
    error, never another value."""
    positions = _integers(positions)
    if positions and (min(positions) < 0 or max(positions) >= len(values)):
        raise ValueError("a column refers to a name the checkpoint does not list")
    return [values[position] for position in positions]
