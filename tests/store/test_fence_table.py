"""The fence table keeps each segment's verdict, not every fence: the verdict must not change.

The definition (store/fences.py, docs/journal-format.md): a segment of epoch E
is valid up to the smallest length any fence of a later epoch lists for it,
and a later fence that does not list it fences it entirely. The table must give
exactly that whatever the order fences arrive in (recovery reads them from
segments and checkpoints), however often, and across a checkpoint round trip.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from primacy.store import payloads
from primacy.store.config import StoreConfig
from primacy.store.fences import FenceTable
from primacy.store.journal import JournalStore

Fences = dict[int, dict[tuple[int, int], int]]


def by_definition(fences: Fences, epoch: int, first_sequence: int) -> int | None:
    applying = [entries for fence_epoch, entries in fences.items() if fence_epoch > epoch]
    if not applying:
        return None
    return min(entries.get((epoch, first_sequence), 0) for entries in applying)


segment_keys = st.tuples(st.integers(1, 8), st.integers(1, 3))
fence_sets = st.dictionaries(
    st.integers(2, 9),
    st.dictionaries(segment_keys, st.integers(0, 5000), max_size=10),
    max_size=6,
)


def entries_of(fence_epoch: int, listed: dict[tuple[int, int], int]) -> list[payloads.FenceEntry]:
    # A fence lists only segments of earlier epochs.
    return [payloads.FenceEntry(e, s, n) for (e, s), n in listed.items() if e < fence_epoch]


@settings(max_examples=300, deadline=None)
@given(fence_sets, st.randoms(use_true_random=False), st.integers(0, 6))
def test_the_table_gives_the_verdict_of_every_fence(
    fences: Fences, rng: object, split: int
) -> None:
    fences = {f: {k: n for k, n in listed.items() if k[0] < f} for f, listed in fences.items()}
    order = list(fences)
    rng.shuffle(order)  # type: ignore[attr-defined]
    table = FenceTable()
    for fence_epoch in order + order[:2]:  # any order, some twice
        table.add(fence_epoch, entries_of(fence_epoch, fences[fence_epoch]))
    # Half the fences in a checkpoint (old or new JSON), half read from segments: merged.
    first, second = FenceTable(), FenceTable()
    for index, fence_epoch in enumerate(order):
        (first if index < split else second).add(
            fence_epoch, entries_of(fence_epoch, fences[fence_epoch])
        )
    restored = FenceTable.from_json(json.loads(json.dumps(first.to_json())))
    restored.merge(second)
    for epoch in range(1, 10):
        for first_sequence in range(1, 4):
            expected = by_definition(fences, epoch, first_sequence)
            assert table.limit_for(epoch, first_sequence) == expected
            assert restored.limit_for(epoch, first_sequence) == expected


def test_a_version_2_checkpoints_fence_list_reads_as_before() -> None:
    old = [
        {"epoch": 3, "entries": [[1, 1, 100], [2, 5, 40]]},
        {"epoch": 5, "entries": [[1, 1, 80], [4, 9, 10]]},
    ]
    table = FenceTable.from_json(old)
    assert table.limit_for(1, 1) == 80
    assert table.limit_for(2, 5) == 0  # fence 5 does not list it
    assert table.limit_for(4, 9) == 10
    assert table.limit_for(5, 1) is None


def test_a_checkpoint_keeps_one_verdict_per_segment_not_every_fence(tmp_path: Path) -> None:
    # Each takeover's fence lists every earlier segment; keeping every fence in
    # every checkpoint made the table (and each takeover's load of it) grow with
    # the square of the epochs: the 550th takeover took ~0.9 s (docs/benchmarks-history.md).
    config = StoreConfig(share=tmp_path, node_id="n")
    for epoch in range(1, 121):
        store = JournalStore.open(config, epoch=epoch, fencing_check=lambda: None)
        store.append_send("/queue/q", f"m{epoch}", b"x").result()
        store.close()
    checkpoints = sorted((tmp_path / "journal" / "checkpoints").glob("*.ckpt"))
    body = json.loads(checkpoints[-1].read_bytes()[24:])
    assert len(body["fences"]["limits"]) == 119  # one verdict per earlier segment
    assert body["fences"]["fence_epochs"] == list(range(1, 121))
