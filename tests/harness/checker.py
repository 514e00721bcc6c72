"""The fault harness's verdict: what the clients saw against what the journal holds.

Four promises, each a list of violations (empty when it held):

- **lost**: an acknowledged (receipted) message that no consumer ever received (a topic
  message: that the durable subscription's consumer never received);
- **duplicates**: a message id with more than one SEND in the valid journal;
- **fencing**: an acknowledged message whose SEND is not in the valid, unfenced
  journal (``store.tools.dump`` emits only those), or a valid record of an
  epoch written after a later epoch fenced it (its timestamp is later than the
  fence's), or a receipt the producer noticed after such a fence for a record
  the fence does not cover;
- **request/reply** (with ``Traffic(request_reply=True)``, tests/harness/request_reply.py):
  receipted requests are judged as queue messages by the three above (owed to the replier,
  stored once); besides, a reply the requester got that answers no request it made (or with
  another request's body), and a request still unanswered once the faults are over (its
  requester re-issues a request whose reply went to a temporary queue gone with its
  connection, as docs/stomp.md promises);
- **two masters**: a node deciding it was master (200 on ``/master``) after a
  node of a newer epoch had decided so, or two nodes under one epoch
  (``MasterPoller.two_masters()``, by each answer's decision time).

The timestamp comparisons are sound because every node of a test group runs
on this machine, on one wall clock: a record stamped after a fence record was
made after the fence measured the old segments, so it lies past the fence and
must not be valid.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primacy.store import tools
from tests.harness.group import MasterPoller
from tests.harness.traffic import Traffic

_SHOWN = 10  # violations quoted per kind; the counts are always complete


@dataclass(frozen=True)
class Fence:
    """A FENCE record: epoch ``epoch`` fenced every ``covered`` epoch at ``timestamp_ns``."""

    epoch: int
    timestamp_ns: int
    covered: frozenset[int]


@dataclass(frozen=True)
class JournalView:
    """The valid, unfenced records of one share, as ``tools.dump`` reads them."""

    records: tuple[dict[str, Any], ...]
    fenced_records: int

    @classmethod
    def read(cls, share: Path) -> JournalView:
        records: list[dict[str, Any]] = []
        report = tools.dump(share, records.append)
        return cls(tuple(records), report.fenced_records)

    def sends(self) -> dict[str, list[dict[str, Any]]]:
        """Every SEND record, by message id."""
        by_id: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        for record in self.records:
            if record["type"] == "SEND":
                by_id[str(record["message_id"])].append(record)
        return by_id

    def fences(self) -> list[Fence]:
        return [
            Fence(
                int(r["epoch"]),
                int(r["timestamp_unix_ns"]),
                frozenset(int(entry["epoch"]) for entry in r["fence"]),
            )
            for r in self.records
            if r["type"] == "FENCE"
        ]

    def story(self, message_ids: set[str]) -> list[str]:
        """What the journal holds for these ids: for failure messages."""
        return [
            f"{r['type']} {r['message_id']} epoch {r['epoch']} seq {r['sequence']}"
            for r in self.records
            if r.get("message_id") in message_ids
        ][:_SHOWN]


@dataclass
class Verdict:
    """Counts and violations of one run; ``ok`` when there are no violations."""

    acknowledged: int
    consumed: int
    stored: int
    fenced_records: int
    epochs: tuple[int, ...]
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    fencing: list[str] = field(default_factory=list)
    two_masters: list[str] = field(default_factory=list)
    client_errors: list[str] = field(default_factory=list)
    # Of ``acknowledged``: sent to the durable topic subscription's topic (owed to it).
    topic_acknowledged: int = 0
    # Of ``acknowledged``: requests (owed to the replier); requests answered; re-issued.
    requests_acknowledged: int = 0
    answered: int = 0
    reissued: int = 0
    request_reply: list[str] = field(default_factory=list)

    @property
    def violations(self) -> list[str]:
        found = []
        for kind in (
            "lost",
            "duplicates",
            "fencing",
            "two_masters",
            "client_errors",
            "request_reply",
        ):
            items: list[str] = getattr(self, kind)
            if items:
                found.append(f"{kind}: {len(items)}: {items[:_SHOWN]}")
        return found

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        return (
            f"acknowledged {self.acknowledged}"
            + (f" (topic {self.topic_acknowledged})" if self.topic_acknowledged else "")
            + (
                f" (requests {self.requests_acknowledged}, answered {self.answered}, "
                f"re-issued {self.reissued})"
                if self.requests_acknowledged
                else ""
            )
            + f", consumed {self.consumed}, stored {self.stored}, "
            f"fenced records {self.fenced_records}, epochs {list(self.epochs)}, "
            f"lost {len(self.lost)}, duplicates {len(self.duplicates)}, "
            f"violations {len(self.violations)}"
        )


def check(
    traffic: Traffic,
    share: Path,
    poller: MasterPoller | None = None,
    *,
    tolerate_errors: tuple[type[BaseException], ...] = (),
) -> Verdict:
    """Judge one run. ``tolerate_errors``: client exception types the scenario expects."""
    journal = JournalView.read(share)
    sends = journal.sends()
    verdict = Verdict(
        acknowledged=len(traffic.acknowledged),
        topic_acknowledged=len(traffic.acknowledged & traffic.topic_sent),
        consumed=len(traffic.consumed),
        stored=len(sends),
        fenced_records=journal.fenced_records,
        epochs=tuple(sorted({int(r["epoch"]) for r in journal.records})),
    )
    lost = traffic.acknowledged - set(traffic.consumed)
    verdict.lost = [
        f"{mid} ({journal.story({mid}) or 'not in the journal'})" for mid in sorted(lost)
    ]
    verdict.duplicates = [
        f"{mid} stored {len(found)} times: {journal.story({mid})}"
        for mid, found in sorted(sends.items())
        if len(found) > 1
    ]
    verdict.fencing = _fencing_violations(traffic, journal, sends)
    if poller is not None:
        verdict.two_masters = [
            f"{a.node_id} (epoch {a.epoch}) decided 200 at monotonic {a.decided_at:.3f} s, "
            f"after {b.node_id} (epoch {b.epoch}) did at {b.decided_at:.3f} s"
            for a, b in poller.two_masters()
        ]
    if traffic.requester is not None:
        requester = traffic.requester
        verdict.requests_acknowledged = len(traffic.acknowledged & traffic.request_ids)
        verdict.answered = len(requester.answers)
        verdict.reissued = requester.reissued
        verdict.request_reply = [f"stray {stray}" for stray in requester.strays] + [
            f"request {c} unanswered after the faults" for c in sorted(requester.unanswered)
        ]
    verdict.client_errors = [
        repr(error) for error in traffic.errors if not isinstance(error, tolerate_errors)
    ]
    return verdict


def _fencing_violations(
    traffic: Traffic, journal: JournalView, sends: dict[str, list[dict[str, Any]]]
) -> list[str]:
    found = [
        f"{mid} acknowledged but its SEND is not in the valid journal (fenced or never written)"
        for mid in sorted(traffic.acknowledged - set(sends))
    ]
    for fence in journal.fences():
        late = [
            r
            for r in journal.records
            if int(r["epoch"]) in fence.covered and int(r["timestamp_unix_ns"]) > fence.timestamp_ns
        ]
        found += [
            f"{r['type']} seq {r['sequence']} of epoch {r['epoch']} stamped after the fence of "
            f"epoch {fence.epoch} yet valid"
            for r in late
        ]
        # Receipts noticed after this fence for messages of a fenced epoch: each must be
        # for a record made before the fence (the check above proves that for valid ones).
        for mid, noticed_ns in traffic.receipt_times_ns.items():
            for record in sends.get(mid, ()):
                if (
                    noticed_ns > fence.timestamp_ns
                    and int(record["epoch"]) in fence.covered
                    and int(record["timestamp_unix_ns"]) > fence.timestamp_ns
                ):
                    found.append(
                        f"{mid} receipted by epoch {record['epoch']} after the fence of epoch "
                        f"{fence.epoch}, for a record made after that fence"
                    )
    return found


def assert_ok(verdict: Verdict) -> None:
    """Fail the test with every violation, or pass."""
    assert verdict.ok, f"{verdict.summary()}\n" + "\n".join(verdict.violations)
