"""Recovering from a checkpoint plus the tail gives exactly the state a full scan gives."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover

operation = st.one_of(
    st.tuples(st.just("send"), st.integers(0, 2), st.integers(0, 30), st.binary(max_size=300)),
    st.tuples(st.just("ack"), st.integers(0, 2), st.integers(0, 30), st.just(b"")),
    st.tuples(st.just("checkpoint"), st.just(0), st.just(0), st.just(b"")),
    st.tuples(st.just("new master"), st.just(0), st.just(0), st.just(b"")),
)


def run(share: Path, operations: list[tuple[str, int, int, bytes]]) -> JournalStore:
    epoch = 1
    config = StoreConfig(
        share=share,
        node_id="n",
        sync_policy=SyncPolicy.WRITE_NO_SYNC,
        segment_max_bytes=4096,
        dedupe_window_messages=7,
    )
    store = JournalStore.open(config, epoch=epoch, fencing_check=lambda: None)
    for kind, destination, number, payload in operations:
        if kind == "send":
            store.append_send(f"q{destination}", f"m{number}", payload)
        elif kind == "ack":
            store.append_ack(f"q{destination}", f"m{number}")
        elif kind == "checkpoint":
            store.checkpoint().result(timeout=10)
        else:
            store.close()
            epoch += 1
            store = JournalStore.open(config, epoch=epoch, fencing_check=lambda: None)
    store.close()
    return store


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, max_size=60))
def test_checkpoint_plus_tail_equals_full_scan(
    operations: list[tuple[str, int, int, bytes]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        share = Path(directory)
        last_store = run(share, operations)
        quick = recover(share / "journal", dedupe_window_messages=7, use_checkpoint=True, log=False)
        full = recover(share / "journal", dedupe_window_messages=7, use_checkpoint=False, log=False)
        assert quick.state.summary() == full.state.summary()
        assert last_store._state.summary() == full.state.summary()
        if any(kind == "checkpoint" for kind, *_ in operations):
            assert quick.report.checkpoint is not None
            assert quick.report.records_applied <= full.report.records_applied
