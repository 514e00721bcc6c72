"""Bodies of recovered messages, read from the journal off the event loop, a few ahead at a time.

A new master knows its recovered messages by where they lie in the journal,
not by their bodies (holding them all would cost the master the journal's
size in memory). Reading one means reading the share, which may hang; on the
event loop that would freeze every connection, including the demotion that
must close them all at once. So one daemon thread reads them, a batch per
destination ahead of its consumers, and posts the bodies back to the loop;
the queue's dispatch waits for its head message's body meanwhile.

The loop side (``request``, ``has_body``, ``take``, ``close``) runs on the
event loop only; ``_read`` runs on the reader thread and touches nothing of
the loop's but ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable

from primacy.broker import codes
from primacy.broker.queues import HeldMessage, QueuedMessage, hold, unhold
from primacy.store.errors import JournalError
from primacy.store.journal import JournalStore

log = logging.getLogger("primacy.broker")

# How far ahead of a destination's consumers bodies are read: enough to fill a
# prefetch window in one go, few enough that memory stays bounded per destination.
BATCH_MESSAGES = 64
BATCH_BYTES = 4 * 1024 * 1024

Loaded = Callable[[str], None]  # called on the loop when a destination's batch is in


class BodyLoader:
    def __init__(
        self, store: JournalStore, loop: asyncio.AbstractEventLoop, on_loaded: Loaded
    ) -> None:
        self._store = store
        self._loop = loop
        self._on_loaded = on_loaded
        # Per destination, in order; plain tuples (queues.py): they may be most of a backlog.
        self._unread: dict[str, deque[HeldMessage]] = {}
        # (order, destination) -> the message with its body, or None if it could not be
        # read. Not the order alone: the copies of one topic message kept for several durable
        # subscriptions share its order, and one subscription's copy must never be taken
        # for another's.
        self._bodies: dict[tuple[int, str], QueuedMessage | None] = {}
        self._reading: set[str] = set()
        self._gone: set[str] = set()  # forgotten while a batch of theirs was being read
        self._jobs: queue.SimpleQueue[tuple[str, list[QueuedMessage]] | None] = queue.SimpleQueue()
        # A daemon: a read stuck on a hung share must not keep the process from exiting.
        self._thread = threading.Thread(target=self._run, name="primacy-body-reader", daemon=True)
        self._thread.start()

    def recovered(self, messages: Iterable[QueuedMessage]) -> None:
        """Messages whose bodies are in the journal, each destination's in queue order."""
        for message in sorted(messages):
            self.in_journal(message)

    def in_journal(self, message: QueuedMessage) -> None:
        """One more message whose body is read back when its turn comes; it must come after
        every message of its destination handed over before (queue order)."""
        self._unread.setdefault(message.destination, deque()).append(hold(message))

    def has_body(self, message: QueuedMessage) -> bool:
        return message.body is not None or _key(message) in self._bodies

    def take(self, message: QueuedMessage) -> QueuedMessage | None:
        """The message with its body (after ``has_body``); None if the journal could not give it."""
        if message.body is not None:
            return message
        return self._bodies.pop(_key(message))

    def forget(self, destination: str) -> None:
        """``destination`` is gone (a temporary queue): its bodies are not wanted any more;
        a batch being read for it is dropped when it comes back."""
        self._unread.pop(destination, None)
        if destination in self._reading:
            self._gone.add(destination)

    def request(self, destination: str) -> None:
        """Read the next batch of ``destination``'s bodies, unless a read is under way."""
        unread = self._unread.get(destination)
        if destination in self._reading or not unread:
            return
        batch = [unhold(unread.popleft()) for _ in range(min(BATCH_MESSAGES, len(unread)))]
        if not unread:
            del self._unread[destination]
        self._reading.add(destination)
        self._jobs.put((destination, batch))

    def close(self) -> None:
        self._jobs.put(None)

    def _done(
        self,
        destination: str,
        bodies: dict[tuple[int, str], QueuedMessage | None],
        unread: list[QueuedMessage],
    ) -> None:
        self._reading.discard(destination)
        if destination in self._gone:
            self._gone.discard(destination)
            return
        self._bodies.update(bodies)
        if unread:  # past the batch's byte budget: first in line for the next request
            self._unread.setdefault(destination, deque()).extendleft(map(hold, reversed(unread)))
        self._on_loaded(destination)

    # ---- the reader thread -------------------------------------------------------

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            destination, batch = job
            bodies: dict[tuple[int, str], QueuedMessage | None] = {}
            size = 0
            while batch and size < BATCH_BYTES:
                message = batch.pop(0)
                loaded = bodies[_key(message)] = _load(self._store, message)
                size += len(loaded.body or b"") if loaded is not None else 0
            try:
                self._loop.call_soon_threadsafe(self._done, destination, bodies, batch)
            except RuntimeError:
                return  # the loop is closed: the broker is gone


def _key(message: QueuedMessage) -> tuple[int, str]:
    return (message.order, message.destination)


def _load(store: JournalStore, message: QueuedMessage) -> QueuedMessage | None:
    assert message.journal_location is not None
    try:
        record = store.read_message(message.journal_location)
    except (JournalError, OSError) as error:
        log.error(
            "%s: message %r of %s cannot be read from the journal (%s); it stays "
            "pending in the journal and is not delivered by this master",
            codes.title(codes.UNREADABLE_MESSAGE),
            message.message_id,
            message.destination,
            error,
        )
        return None
    return QueuedMessage(
        message.order,
        message.destination,
        message.message_id,
        tuple(record.headers.items()),
        record.payload,
        message.journal_location,
        message.redelivered,
    )
