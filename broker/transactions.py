"""A connection's open STOMP transactions: what each will do on COMMIT; nothing on ABORT.

A SEND, ACK or NACK naming a transaction is kept here as a step, not run: a
send in an aborted transaction is never stored and never acknowledged, and the
steps of a committed one run in the order they arrived, as if sent then.
"""

from __future__ import annotations

from collections.abc import Callable

from primacy.broker import codes
from primacy.broker.core import Refused
from primacy.broker.frame_rules import required
from primacy.broker.frames import Frame
from primacy.broker.replies import Writes

Step = Callable[[], Writes]


class Transactions:
    def __init__(self) -> None:
        self._open: dict[str, list[Step]] = {}

    def begin(self, frame: Frame) -> None:
        name = required(frame, "transaction")
        if name in self._open:
            raise Refused(codes.BAD_REQUEST, f"transaction {name!r} is already open")
        self._open[name] = []

    def commit(self, frame: Frame) -> Writes:
        """Run the transaction's steps; the journal writes they started."""
        writes: Writes = []
        for step in self._take(frame):
            writes += step()
        return writes

    def abort(self, frame: Frame) -> None:
        self._take(frame)  # acknowledgements in it are dropped, sends never stored

    def now_or_on_commit(self, frame: Frame, step: Step) -> Writes:
        """Run ``step`` now, or keep it for COMMIT if ``frame`` names a transaction."""
        name = frame.get("transaction")
        if name is None:
            return step()
        steps = self._open.get(name)
        if steps is None:
            raise Refused(codes.BAD_REQUEST, f"no open transaction {name!r}")
        steps.append(step)
        return []

    def clear(self) -> None:
        self._open.clear()

    def _take(self, frame: Frame) -> list[Step]:
        name = required(frame, "transaction")
        steps = self._open.pop(name, None)
        if steps is None:
            raise Refused(codes.BAD_REQUEST, f"no open transaction {name!r}")
        return steps
