"""The dedupe window: the last N (destination, message id) pairs the journal accepted, with
the sequence of each SEND, oldest first; one in and (once full) one out per message.

It used to be one ``OrderedDict``. Deleting its oldest key leaves a dead slot behind, and
once they fill the table CPython rebuilds it whole: at a 100 000-id window, a 10 MiB
table every ~250 000 messages, 14-45 ms inside the commit path under the state lock (a
RECEIPT latency spike). One plain dict grows the same way. Here nothing large is ever
rebuilt:

- the order is a ring of keys and one of sequences, appended to while the window fills
  and then overwritten in place (no table behind them, only pointer arrays that grow
  by appending while filling);
- membership (and each key's slot in the rings) is one small dict per hash partition
  (``hash(key) & mask``), a few thousand keys each, so that when one of them is rebuilt,
  that takes microseconds.

Same contents, same order, same answers as the ``OrderedDict`` (tests/store/
test_dedupe_window.py runs both side by side), so checkpoints are byte for byte what
they were.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain, islice

Key = tuple[str, str]

# Keys per partition, about: small enough that rebuilding one takes microseconds.
KEYS_PER_PARTITION = 2048


class DedupeWindow:
    """At most ``capacity`` keys, each with its sequence, in the order they were added."""

    def __init__(self, capacity: int, items: Iterable[tuple[Key, int]] = ()) -> None:
        self.capacity = capacity
        partitions = 1
        while partitions * KEYS_PER_PARTITION < capacity:
            partitions *= 2
        self._mask = partitions - 1
        # Each key's slot in the rings, in the dict of its partition.
        self._parts: list[dict[Key, int]] = [{} for _ in range(partitions)]
        self._keys: list[Key] = []  # the ring: slot ``_head`` holds the oldest once full
        self._sequences: list[int] = []
        self._head = 0
        for key, sequence in items:  # the newest ``capacity`` of them stay
            self.add(key, sequence)

    def __contains__(self, key: object) -> bool:
        return key in self._parts[hash(key) & self._mask]

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: Key, sequence: int) -> None:
        """Add ``key`` as the newest; the oldest leaves if the window is full. A key already in
        the window keeps its place and takes the new sequence, as an ``OrderedDict`` does (a
        checkpoint of versions 2 and 3 may list an id twice)."""
        if self.capacity <= 0:
            return
        part = self._parts[hash(key) & self._mask]
        slot = part.get(key)
        if slot is not None:
            self._sequences[slot] = sequence
            return
        if len(self._keys) < self.capacity:
            part[key] = len(self._keys)
            self._keys.append(key)
            self._sequences.append(sequence)
            return
        head = self._head
        oldest = self._keys[head]
        del self._parts[hash(oldest) & self._mask][oldest]
        part[key] = head
        self._keys[head] = key
        self._sequences[head] = sequence
        self._head = head + 1 if head + 1 < self.capacity else 0

    def copy(self) -> DedupeWindow:
        """The same window, changed apart from this one from now on: copies of the rings and
        partitions (C copies of pointer arrays and small dicts; the keys are shared)."""
        twin = DedupeWindow(0)
        twin.capacity = self.capacity
        twin._mask = self._mask
        twin._parts = [dict(part) for part in self._parts]
        twin._keys = self._keys.copy()
        twin._sequences = self._sequences.copy()
        twin._head = self._head
        return twin

    def __iter__(self) -> Iterator[Key]:
        """The keys, oldest first (no copy: a checkpoint reads them while it writes)."""
        return chain(islice(self._keys, self._head, None), islice(self._keys, self._head))

    def values(self) -> Iterator[int]:
        """The sequences, oldest first."""
        sequences = self._sequences
        return chain(islice(sequences, self._head, None), islice(sequences, self._head))

    def items(self) -> Iterator[tuple[Key, int]]:
        return zip(iter(self), self.values(), strict=True)
