"""Recovery, `journal verify` and the replay give every batch of a crafted journal one verdict.

The corpus (tests/store/read_side_corpus.py) holds every kind of damage issue 43
found the replay judging otherwise than recovery, or not at all: CRC-valid batches
whose lengths do not add up (the replay exited with ``ArrowInvalid``), records of a
foreign epoch or sequence, batches cut short, a stale master's writes, and
checkpoints that recovery refuses (naming a missing segment, oversized) but whose
fences the replay applied. Each of the three is run as its users run it (recovery
as a node opens the journal, with its checkpoint; ``journal verify`` as a command;
the replay's reader function, which the Spark job runs per partition); the Spark
job itself over the same corpus is in test_replay_damage.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from primacy.spark.journal_plan import plan_segments, read_fences
from primacy.spark.segment_reader import RECORDS_SCHEMA, STATUS_FENCED, read_segment_batches
from primacy.store.recovery import RecoveryResult, recover
from primacy.store.segments import list_segments
from tests.harness.cli import primacy
from tests.store.read_side_corpus import CHECKPOINT_VARIANTS, Corpus, write_corpus

EXPECTED = {
    "lengths that do not add up": "damaged_batch",
    "a record of a foreign epoch": "damaged_batch",
    "a record of another sequence": "damaged_batch",
    "a sequence repeated": "damaged_batch",
    "an unknown record type": "damaged_batch",
    "a destination not UTF-8": "damaged_batch",
    "a sequence no node reaches": "damaged_batch",
    "a stale master's write past the fence": "fenced",
    "a stale master's batch not ours either": "fenced",
    "a segment no fence lists": "fenced",
    "a batch cut short in a sealed segment": "damaged_batch",
    "lengths running past the segment's end": "damaged_batch",
    "a torn tail": "torn_tail",
}


@dataclass(frozen=True)
class Verdict:
    """What one reader made of the journal."""

    valid_batches: int
    records: int
    damage: frozenset[tuple[str, int, str]]  # (segment, offset, kind)
    fenced_batches: frozenset[tuple[str, int]]  # of recovery and the replay only


def by_recovery(corpus: Corpus) -> tuple[Verdict, RecoveryResult, set[tuple[str, int]]]:
    valid: set[tuple[str, int]] = set()
    result = recover(corpus.journal, visit=lambda s, b, _: valid.add((s.name, b.offset)), log=False)
    report = result.report
    damage = frozenset(
        (d.segment, d.offset, d.kind.value) for d in report.damaged + report.torn_tails
    )
    fenced = frozenset(
        (write.segment, offset)
        for write in report.fenced
        for offset in _fenced_offsets(corpus, write.segment, write.offset, write.batches)
    )
    return Verdict(len(valid), report.records_applied, damage, fenced), result, valid


def _fenced_offsets(corpus: Corpus, segment: str, start: int, batches: int) -> list[int]:
    """Where recovery's count of fenced batches lies: ``batches`` batches from ``start``."""
    from primacy.store import format as fmt

    data, offsets, offset = (corpus.journal / segment).read_bytes(), [], start
    for _ in range(batches):
        offsets.append(offset)
        offset += fmt.batch_header_at(memoryview(data), offset).batch_len
    return offsets


def by_verify(corpus: Corpus) -> tuple[Verdict, str]:
    result = primacy("journal", "verify", str(corpus.share))
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in out, out
    summary = re.search(
        r"(\d+) segment\(s\), (\d+) valid batch\(es\), (\d+) record\(s\); (\d+) torn tail", out
    )
    assert summary is not None, out
    damage = {
        (m[2], int(m[3]), m[1]) for m in re.finditer(r"PROBLEM: (\w+) in (\S+) at byte (\d+)", out)
    }
    damage |= {
        (m[1], int(m[2]), "torn_tail")
        for m in re.finditer(
            r"torn tail \(cut off, expected after a crash\): (\S+) from byte (\d+)", out
        )
    }
    return Verdict(int(summary[2]), int(summary[3]), frozenset(damage), frozenset()), out


def by_replay(corpus: Corpus) -> tuple[Verdict, pa.Table]:
    batches = [b for plan in plan_segments(corpus.share) for b in read_segment_batches(plan)]
    rows = pa.Table.from_batches(batches, schema=RECORDS_SCHEMA).to_pylist()
    ok = [r for r in rows if r["status"] == "ok"]
    damage = frozenset(
        (r["segment"], r["batch_offset"], r["status"])
        for r in rows
        if r["status"] not in ("ok", STATUS_FENCED)
    )
    fenced = frozenset(
        (r["segment"], r["batch_offset"])
        for r in rows
        if r["status"] == STATUS_FENCED
        and not (r["detail"] or "").startswith("bytes past the fence that are not")
    )
    valid = {(r["segment"], r["batch_offset"]) for r in ok}
    return Verdict(len(valid), len(ok), damage, fenced), pa.Table.from_pylist(rows)


@pytest.fixture(scope="module", params=CHECKPOINT_VARIANTS)
def corpus(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return write_corpus(tmp_path_factory.mktemp("parity") / "share", request.param)


def test_the_three_readers_classify_every_batch_alike(corpus: Corpus) -> None:
    recovered, _, _ = by_recovery(corpus)
    replayed, _ = by_replay(corpus)
    verified, output = by_verify(corpus)
    assert replayed == recovered
    assert (verified.valid_batches, verified.records, verified.damage) == (
        recovered.valid_batches,
        recovered.records,
        recovered.damage,
    ), output


def test_each_crafted_batch_gets_the_verdict_recovery_gives(corpus: Corpus) -> None:
    recovered, _, valid = by_recovery(corpus)
    verdicts = {(segment, offset): kind for segment, offset, kind in recovered.damage}
    verdicts |= dict.fromkeys(recovered.fenced_batches, "fenced")
    found = {what: verdicts.get(where, "ok") for what, where in corpus.crafted.items()}
    assert found == EXPECTED
    assert len(valid) == 8  # every batch not crafted: 2 fences and 6 of sends


def test_the_replay_gives_recoverys_reason_for_each_damaged_batch(corpus: Corpus) -> None:
    _, result, _ = by_recovery(corpus)
    _, table = by_replay(corpus)
    reasons = {
        (r["segment"], r["batch_offset"]): r["detail"]
        for r in table.to_pylist()
        if r["status"] not in ("ok", STATUS_FENCED)
    }
    report = result.report
    assert reasons == {(d.segment, d.offset): d.reason for d in report.damaged + report.torn_tails}
    assert "do not add up" in reasons[_where(corpus, "lengths that do not add up")]


def test_the_replay_applies_the_fences_recovery_applies(corpus: Corpus) -> None:
    _, result, _ = by_recovery(corpus)
    replayed = read_fences(corpus.share)
    for segment in list_segments(corpus.journal):
        key = segment.key
        assert replayed.limit_for(*key) == result.fences.limit_for(*key), segment.name
    skipped = result.report.skipped_checkpoints
    assert len(skipped) == (0 if not list((corpus.journal / "checkpoints").glob("*")) else 1)


def _where(corpus: Corpus, what: str) -> tuple[str, int]:
    return corpus.crafted[what]


def test_the_corpus_holds_each_checkpoint_variant_recovery_refuses(tmp_path: Path) -> None:
    """Both crafted checkpoints are skipped for their own reason, and no other."""
    reasons = {}
    for variant in CHECKPOINT_VARIANTS[1:]:
        corpus = write_corpus(tmp_path / variant.replace(" ", "-"), variant)
        (skipped,) = recover(corpus.journal, log=False).report.skipped_checkpoints
        reasons[variant] = skipped
    assert "is missing or shorter" in reasons["missing segment"]
    assert "can need: not read" in reasons["oversized"]
