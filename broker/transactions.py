"""A connection's open STOMP transactions: what each will do on COMMIT; nothing on ABORT.

A SEND, ACK or NACK naming a transaction is kept here as a step, not run: a
send in an aborted transaction is never stored and never acknowledged, and the
steps of a committed one run in the order they arrived, as if sent then.

What the steps hold stays in memory until COMMIT or ABORT, so a connection may
have at most ``max_open`` transactions open, holding at most ``max_bytes`` of
frames together; past either the frame is refused and, as every
ERROR does, that ends the connection, its transactions dropped, nothing stored. Each
transaction's name, bookkeeping and frames are also charged to the connection's
``StateAccount`` (state_limits.py), with its subscriptions, against the budgets per
connection, per network and in all.

A transaction keeps which messages its SENDs store (destination and id): COMMIT
asks whether all of them fit the broker's message limits at once (``commit``'s
``check_room``), and runs none of its steps if they do not. A SEND's own check,
when it arrives, sees only messages already stored, not those its transaction
still holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from primacy.broker import codes
from primacy.broker.counters import Counters
from primacy.broker.frame_rules import required
from primacy.broker.frames import Frame
from primacy.broker.refusals import Refused
from primacy.broker.replies import Writes
from primacy.broker.state_limits import StateAccount, transaction_bytes

Step = Callable[[], Writes]
SendKey = tuple[str, str]  # the destination and message id a SEND stores


@dataclass
class _Transaction:
    steps: list[Step] = field(default_factory=list)
    held_bytes: int = 0
    charged: int = 0  # to the connection's StateAccount: bookkeeping, name and frames
    sends: list[SendKey] = field(default_factory=list)


class Transactions:
    def __init__(
        self, max_open: int, max_bytes: int, counters: Counters, state: StateAccount
    ) -> None:
        self.max_open = max_open
        self.max_bytes = max_bytes
        self._counters = counters
        self._state = state
        self._open: dict[str, _Transaction] = {}
        self._held_bytes = 0  # by every open transaction together

    def begin(self, frame: Frame) -> None:
        name = required(frame, "transaction")
        if name in self._open:
            raise Refused(codes.BAD_REQUEST, f"transaction {name!r} is already open")
        if len(self._open) >= self.max_open:
            self._refuse(f"a connection may have at most {self.max_open} open transactions")
        cost = transaction_bytes(name)
        self._charge(cost, f"the BEGIN of {name[:64]!r}")
        self._open[name] = _Transaction(charged=cost)

    def commit(self, frame: Frame, check_room: Callable[[list[SendKey]], None]) -> Writes:
        """Run the transaction's steps; the journal writes they started.

        ``check_room`` gets the messages its SENDs store, and raises ``Refused`` if they
        do not fit: then the transaction is gone, nothing of it run.
        """
        transaction = self._take(frame)
        check_room(transaction.sends)
        writes: Writes = []
        for step in transaction.steps:
            writes += step()
        return writes

    def abort(self, frame: Frame) -> None:
        self._take(frame)  # acknowledgements in it are dropped, sends never stored

    def now_or_on_commit(self, frame: Frame, step: Step, sends: SendKey | None = None) -> Writes:
        """Run ``step`` now, or keep it for COMMIT if ``frame`` names a transaction.

        ``sends``: the message ``step`` stores, if it is a SEND.
        """
        name = frame.get("transaction")
        if name is None:
            return step()
        transaction = self._open.get(name)
        if transaction is None:
            raise Refused(codes.BAD_REQUEST, f"no open transaction {name!r}")
        size = _held_size(frame)
        if self._held_bytes + size > self.max_bytes:
            self._refuse(
                f"open transactions would hold more than {self.max_bytes} bytes; commit sooner"
            )
        self._charge(size, f"this {frame.command} in transaction {name[:64]!r}")
        transaction.charged += size
        transaction.steps.append(step)
        if sends is not None:
            transaction.sends.append(sends)
        transaction.held_bytes += size
        self._held_bytes += size
        return []

    def clear(self) -> None:
        """The connection is going (its StateAccount is closed with it)."""
        self._open.clear()
        self._held_bytes = 0

    def _take(self, frame: Frame) -> _Transaction:
        name = required(frame, "transaction")
        transaction = self._open.pop(name, None)
        if transaction is None:
            raise Refused(codes.BAD_REQUEST, f"no open transaction {name!r}")
        self._held_bytes -= transaction.held_bytes
        self._state.refund(transaction.charged)
        return transaction

    def _charge(self, nbytes: int, what: str) -> None:
        try:
            self._state.charge(nbytes, what)
        except Refused:
            self._counters.transactions_refused += 1
            raise

    def _refuse(self, detail: str) -> None:
        self._counters.transactions_refused += 1
        raise Refused(codes.TRANSACTION_LIMIT, detail)


def _held_size(frame: Frame) -> int:
    """What keeping ``frame`` costs: its body and headers, and a little for the step itself."""
    return 64 + len(frame.body) + sum(len(key) + len(value) for key, value in frame.headers)
