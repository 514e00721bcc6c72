"""Who was master when: tenures per epoch and the gaps between them, from small driver-side facts.

Evidence, strongest first: the role control records the supervisor journals
(``{"event": "role", "to": "master"}`` on becoming master, ``"to": "stopping"`` on a
graceful stop, ``"demoting"`` on a switchover or another graceful step down; roles as
``share/records.py`` spells them), the group's epoch claims (who claimed each epoch and
when, read through the share port: the share's ``epochs/``, or a ZooKeeper group's
znodes), and the records themselves (each epoch's
fence, first and last record, fenced writes). A crash leaves no stop record:
the tenure then ends when the next epoch was claimed, the moment the old
master's lease stopped being current.

Spark computes the per-epoch facts; this module is plain Python over a few
rows per epoch, so it is tested without Spark.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primacy.share.factory import GroupLocation, reading
from primacy.share.port import ShareObserver, epoch_claims
from primacy.share.records import Role, RoleChange, parse_role

GRACEFUL = "graceful"
CRASHED = "crashed"  # no stop record; a later epoch took over
LOST_LEASE = "lost_lease"  # as crashed, and it kept writing after it was replaced (fenced)
SERVING = "serving"  # the last epoch, no stop record
NEVER_SERVED = "never_served"  # claimed, but no role record or message shows it serving


@dataclass(frozen=True)
class EpochClaim:
    """One ``epochs/N`` file: who claimed the epoch and when (the claimer's wall clock)."""

    epoch: int
    node: str | None
    claimed_unix_ns: int | None


@dataclass(frozen=True)
class EpochFacts:
    """What the valid records of one epoch show (computed by Spark)."""

    epoch: int
    node: str | None  # from the segment headers
    first_record_unix_ns: int  # usually the fence
    last_record_unix_ns: int
    first_message_unix_ns: int | None  # first SEND or ACK
    records: int
    fenced_records: int = 0


@dataclass(frozen=True)
class RoleEvent:
    """One journaled role change."""

    epoch: int
    node: str | None
    from_role: str
    to_role: str
    reason: str | None
    unix_ns: int


@dataclass(frozen=True)
class Tenure:
    """One epoch's time as master and how it ended."""

    epoch: int
    node: str | None
    claimed_unix_ns: int | None
    serving_from_unix_ns: int | None
    last_seen_unix_ns: int | None  # the last record or role event of this epoch
    ended_unix_ns: int | None
    how_ended: str
    end_reason: str | None
    records: int
    fenced_records: int

    @property
    def served(self) -> bool:
        return self.serving_from_unix_ns is not None


@dataclass(frozen=True)
class Gap:
    """A time with no serving master, between two tenures (or open after the last one)."""

    after_epoch: int
    before_epoch: int | None
    from_node: str | None
    to_node: str | None
    from_unix_ns: int
    to_unix_ns: int | None
    # For a crash the outage may have begun as early as the old master's last record.
    earliest_from_unix_ns: int
    cause: str

    @property
    def duration_s(self) -> float | None:
        return None if self.to_unix_ns is None else (self.to_unix_ns - self.from_unix_ns) / 1e9

    @property
    def longest_duration_s(self) -> float | None:
        if self.to_unix_ns is None:
            return None
        return (self.to_unix_ns - self.earliest_from_unix_ns) / 1e9


# Where the claims of the group being replayed are read (``claims_from``); unset: the share's
# own epochs/ directory. A context variable, so it is the run's own, on the driver's thread.
_CLAIMS_PORT: ContextVar[ShareObserver | None] = ContextVar("claims_port", default=None)


@contextmanager
def claims_from(port: ShareObserver) -> Iterator[None]:
    """While this lasts, ``read_epoch_claims`` reads the group's claims through ``port``: a
    group whose epochs live on ZooKeeper (``primacy replay --zookeeper``), whose share has no
    epochs/ of its own."""
    token = _CLAIMS_PORT.set(port)
    try:
        yield
    finally:
        _CLAIMS_PORT.reset(token)


def read_epoch_claims(share: str | Path | ShareObserver) -> dict[int, EpochClaim]:
    """Who claimed each epoch and when, from the group's epoch records, through the port
    (``share/port.py``): a port given, the one ``claims_from`` set, or a reader's port on the
    share's own files (built by ``share/factory.py``)."""
    if isinstance(share, str | Path):
        port = _CLAIMS_PORT.get()
        if port is None:
            with reading(GroupLocation(Path(share))) as own:
                return _claims(own)
        return _claims(port)
    return _claims(share)


def _claims(port: ShareObserver) -> dict[int, EpochClaim]:
    claims: dict[int, EpochClaim] = {}
    # An unreadable claim still proves the epoch was claimed.
    for epoch, record in epoch_claims(port).items():
        claimed_s = None if record is None else record.claimed_unix_s
        claims[epoch] = EpochClaim(
            epoch,
            None if record is None else record.node_id,
            None if claimed_s is None else int(claimed_s * 1e9),
        )
    return claims


def role_event_from_control(payload: dict[str, Any], epoch: int, unix_ns: int) -> RoleEvent | None:
    """A role change from a CONTROL record's JSON, or None if it is another kind of event."""
    change = RoleChange.from_json(payload)
    if change is None:
        return None
    return RoleEvent(
        epoch=epoch,
        node=change.node,
        from_role=change.from_role,
        to_role=change.to_role,
        reason=change.reason,
        unix_ns=unix_ns,
    )


def build_tenures(
    facts: dict[int, EpochFacts],
    claims: dict[int, EpochClaim],
    events: list[RoleEvent],
) -> list[Tenure]:
    """One tenure per epoch that the journal or the ``epochs/`` directory knows, in order."""
    epochs = sorted(set(facts) | set(claims))
    tenures = []
    for index, epoch in enumerate(epochs):
        fact, claim = facts.get(epoch), claims.get(epoch)
        mine = sorted((e for e in events if e.epoch == epoch), key=lambda e: e.unix_ns)
        became = [e.unix_ns for e in mine if parse_role(e.to_role) is Role.MASTER]
        serving_from: int | None = None
        if became:
            serving_from = became[0]
        elif fact is not None:
            serving_from = fact.first_message_unix_ns
        start = serving_from if serving_from is not None else 0
        stops = [e for e in mine if parse_role(e.to_role) is not Role.MASTER and e.unix_ns >= start]
        seen = [e.unix_ns for e in mine]
        if fact is not None:
            seen.append(fact.last_record_unix_ns)
        successor = epochs[index + 1] if index + 1 < len(epochs) else None
        ended: int | None
        reason: str | None
        if stops:
            ended, how, reason = stops[0].unix_ns, GRACEFUL, _stop_reason(stops[0])
        elif successor is not None:
            ended = _takeover_unix_ns(facts.get(successor), claims.get(successor))
            how = LOST_LEASE if fact is not None and fact.fenced_records else CRASHED
            reason = f"no stop record; epoch {successor} took over"
        else:
            ended, how, reason = None, SERVING, None
        if serving_from is None:
            how = NEVER_SERVED
        tenures.append(
            Tenure(
                epoch=epoch,
                node=(claim and claim.node)
                or (fact and fact.node)
                or (mine[0].node if mine else None),
                claimed_unix_ns=claim.claimed_unix_ns if claim else None,
                serving_from_unix_ns=serving_from,
                last_seen_unix_ns=max(seen) if seen else None,
                ended_unix_ns=ended,
                how_ended=how,
                end_reason=reason,
                records=fact.records if fact else 0,
                fenced_records=fact.fenced_records if fact else 0,
            )
        )
    return tenures


def build_gaps(tenures: list[Tenure]) -> list[Gap]:
    """Every stretch with no serving master between served tenures, and an open one at the end."""
    served = [t for t in tenures if t.served]
    gaps = []
    for before, after in zip(served, [*served[1:], None], strict=True):
        if before.ended_unix_ns is None:
            continue  # still serving at the end of the journal
        start = before.ended_unix_ns
        end = None if after is None else after.serving_from_unix_ns
        if end is not None and end <= start:
            continue  # overlapping evidence (clock skew between nodes): no gap to report
        earliest = start
        if before.how_ended != GRACEFUL and before.last_seen_unix_ns is not None:
            earliest = min(start, before.last_seen_unix_ns)
        gaps.append(
            Gap(
                after_epoch=before.epoch,
                before_epoch=None if after is None else after.epoch,
                from_node=before.node,
                to_node=None if after is None else after.node,
                from_unix_ns=start,
                to_unix_ns=end,
                earliest_from_unix_ns=earliest,
                cause=before.how_ended,
            )
        )
    return gaps


def _takeover_unix_ns(facts: EpochFacts | None, claim: EpochClaim | None) -> int | None:
    """When the next epoch was claimed; failing that, its fence (its first record)."""
    if claim is not None and claim.claimed_unix_ns is not None:
        return claim.claimed_unix_ns
    return facts.first_record_unix_ns if facts is not None else None


def _stop_reason(event: RoleEvent) -> str:
    return f"{event.from_role} -> {event.to_role}" + (f": {event.reason}" if event.reason else "")
