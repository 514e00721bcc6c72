"""A checkpoint once a burst is over, so the next master does not replay the burst."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from primacy.cli.localgroup import wait_until
from primacy.store import format as fmt
from primacy.store.config import SyncPolicy
from primacy.store.journal import JournalStore
from primacy.store.writer import GroupCommitWriter, SegmentFile

BURST = 300


def _checkpoints(share: Path) -> list[str]:
    directory = share / "journal" / "checkpoints"
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def test_a_burst_is_checkpointed_once_the_writer_idles_and_a_takeover_replays_none_of_it(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    share = tmp_path / "share"
    settings = {"checkpoint_idle_s": 0.05, "checkpoint_idle_min_records": BURST}
    store = open_store(**settings)
    before = _checkpoints(share)
    futures = [store.append_send("/queue/a", f"m{n}", b"x" * 100) for n in range(BURST)]
    for future in futures:
        future.result(timeout=10)
    wait_until(lambda: _checkpoints(share) != before, 30, "a checkpoint after the burst")
    store.close()
    successor = open_store(epoch=2, **settings)
    assert successor.recovery.report.checkpoint is not None
    assert successor.recovery.report.records_applied == 0  # the whole burst was in it
    assert len(successor.recovery.state.pending["/queue/a"]) == BURST


def test_the_idle_job_runs_once_after_each_burst_and_never_before_the_first(
    tmp_path: Path,
) -> None:
    runs: list[int] = []
    ran = threading.Event()
    writer = GroupCommitWriter(
        SegmentFile(tmp_path, 1, "node-a", 1 << 20),
        SyncPolicy.SYNC,
        fencing_check=lambda: None,
        on_commit=lambda *_: None,
        next_sequence=1,
        max_batch_bytes=1 << 16,
        background_sync_interval_s=0.05,
    )

    def job() -> None:
        runs.append(writer.records_written)
        ran.set()

    writer.when_idle(0.05, job)
    try:
        # Jobs run between batches, where an idle job would; none has committed anything.
        writer.call(lambda: None).result(timeout=10)
        assert runs == []
        for burst in (1, 2):
            ran.clear()
            # The writer held in a job while the burst is queued: one batch, one idle time.
            held = threading.Event()
            writer.call(held.wait)
            futures = [
                writer.submit(fmt.EncodedRecord(fmt.RecordType.SEND, 0, b"/queue/a", b"m"), "", "")
                for _ in range(5)
            ]
            held.set()
            for future in futures:
                future.result(timeout=10)
            assert ran.wait(30), f"no idle job after burst {burst}"
            writer.call(lambda: None).result(timeout=10)  # a turn with nothing new
            assert runs == [5 * n for n in range(1, burst + 1)]
    finally:
        writer.close()
