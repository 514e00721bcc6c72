"""What becomes of a message that cannot be delivered: moved to its dead-letter queue, held
back, or expired (expiry.py). Mixed into ``Broker`` (``core.py``), whose journal, books and
counters it uses; everything here runs on the broker's loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from primacy.broker import codes
from primacy.broker.config import BrokerConfig
from primacy.broker.counters import Counters
from primacy.broker.dead_letter import dead_letter_headers, dead_letter_queue, dead_letterable
from primacy.broker.expiry import expires_at_ms, is_persistent
from primacy.broker.queues import QueueBook, QueuedMessage
from primacy.store import format as fmt
from primacy.store.errors import MessageTooLarge
from primacy.store.journal import JournalStore

log = logging.getLogger("primacy.broker")


class BrokerFailed(Exception):
    """The journal failed; the broker is stopping and accepts nothing more."""


class MessageFates:
    """The broker's dead-lettering, holding back and expiry."""

    store: JournalStore
    config: BrokerConfig
    book: QueueBook
    counters: Counters
    held_back: list[QueuedMessage]

    if TYPE_CHECKING:  # the broker's own, see core.py

        def send(
            self,
            destination: str,
            message_id: str,
            headers: dict[str, str],
            body: bytes,
            record: fmt.EncodedRecord | None = None,
            *,
            new_id: bool = False,
        ) -> asyncio.Future[int]: ...

        def settle(self, messages: list[QueuedMessage]) -> list[asyncio.Future[int]]: ...

    def _redelivery_cause(self, message: QueuedMessage) -> str:
        return (
            f"came back unacknowledged {message.returns + 1} times "
            f"(max_redeliveries {self.config.max_redeliveries})"
        )

    def _dead_letter(self, message: QueuedMessage, cause: str, *, expired: bool = False) -> None:
        """Store it in ``/queue/DLQ.<name>`` and settle the original, or hold it back (an
        expired one that cannot move is dropped: it may not be delivered any more)."""
        destination = dead_letter_queue(message.destination)
        headers = dead_letter_headers(message, cause)
        body = message.body or b""
        try:
            record = self.store.encode_send(destination, message.message_id, body, headers)
        except MessageTooLarge as error:  # the copy's added headers made it too large
            if expired:
                self._settle_quietly(message)
                return
            self._hold_back(
                message,
                f"came back unacknowledged {message.returns + 1} times and cannot move to "
                f"{destination}: {error}",
            )
            return
        try:
            # Both go to the journal in this order, usually in one batch; if only the first
            # is stored, the copy and the original are one id apart: the original comes back
            # and its next dead-lettering is a resend the DLQ drops.
            self.send(destination, message.message_id, headers, body, record)
            self.settle([message])
        except BrokerFailed:
            return  # every connection is being aborted; the journal keeps the original
        if expired:
            return  # counted as expired (``_expire``); a flood of them must not flood the log
        self.counters.dead_lettered += 1
        log.warning(
            "%s: message %r of %s moved to %s: %s",
            codes.title(codes.DEAD_LETTERED),
            message.shown_id,
            message.destination,
            destination,
            headers["dlqDeliveryFailureCause"],
        )

    def _expire(self, message: QueuedMessage) -> None:
        """``message`` (with its headers) passed its expiry: never delivered; moved to its
        dead-letter queue if persistent and on a queue that has one, else settled."""
        self.counters.messages_expired += 1
        if is_persistent(message.headers) and dead_letterable(message.destination):
            expired_at = expires_at_ms(message.headers)
            self._dead_letter(message, f"expired (expires {expired_at})", expired=True)
        else:
            self._settle_quietly(message)

    def _settle_quietly(self, message: QueuedMessage) -> None:
        try:
            self.settle([message])
        except BrokerFailed:
            return

    def _expire_due(self, due: dict[str, set[int]]) -> None:
        """The sweep: messages waiting in a queue past their expiry leave it. One whose body
        is still in the journal (recovered, or over ``max_body_memory_bytes``) is left to
        the check on delivery, which reads it first."""
        for destination, orders in due.items():
            queue = self.book.queues.get(destination)
            if queue is None:
                continue
            gone = [m for m in queue.ready_with_orders(orders) if m.body is not None]
            if not gone:
                continue
            self.book.remove_ready(destination, {m.order for m in gone})
            for message in gone:
                self._expire(message)
            self.book.forget_if_unused(destination)

    def _hold_back(self, message: QueuedMessage, why: str) -> None:
        """Keep a poison message stored (and counted against the limits), but deliver it no
        more on this master: redelivered at once, it would loop, growing the journal by a
        DELIVER record each time. A new master (switchover, restart) delivers it again."""
        self.held_back.append(message)
        log.error(
            "%s: message %r of %s %s; it stays in the journal, unacknowledged, and the next "
            "master delivers it again",
            codes.title(codes.MESSAGE_HELD_BACK),
            message.shown_id,
            message.destination,
            why,
        )
