"""What a new master's ``JournalStore.open`` costs over a full dedupe window, in time and memory.

Builds a journal the way a busy master leaves it (100 000 message ids in the dedupe
window, 28 000 of them still pending, a checkpoint), then opens it again and again as a
new master on a fresh copy (claim an epoch, recover, fence, takeover checkpoint), and
prints the median time of ``open`` beside the median of ``recover`` alone on the same
copies (the baseline: reading the newest checkpoint and the records after it), their
ratio, and the memory the open store keeps (tracemalloc, one extra run; tracing slows
it, so it is not timed). Issue 30's failover figure is mostly this step when the old
master's process has ended.

    .venv/bin/python bench/takeover_open.py              # ~30 s
    .venv/bin/python bench/takeover_open.py --runs 15
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from primacy.share.layout import journal_dir
from primacy.share.posix import PosixShare
from primacy.share.records import EpochRecord
from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover

WINDOW = 100_000
PENDING = 28_000


def build(share: Path) -> None:
    share.mkdir(parents=True)
    epoch = PosixShare(share).claim_epoch(EpochRecord(0, node_id="old"))
    config = StoreConfig(share=share, node_id="old", sync_policy=SyncPolicy.NO_SYNC)
    with JournalStore.open(config, epoch=epoch, fencing_check=lambda: None) as store:
        sends = [store.append_send("/queue/q", f"m{i:06d}", b"x" * 64) for i in range(WINDOW)]
        sends[-1].result()
        acks = [store.append_ack("/queue/q", f"m{i:06d}") for i in range(WINDOW - PENDING)]
        acks[-1].result()
        store.checkpoint().result()


def fresh_copy(share: Path, copy: Path) -> Path:
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(share, copy, symlinks=True)
    return copy


def time_open(share: Path, copy: Path, trace: bool = False) -> tuple[float, int]:
    """Seconds ``open`` took, and with ``trace`` the bytes the open store keeps."""
    fresh_copy(share, copy)
    epoch = PosixShare(copy).claim_epoch(EpochRecord(0, node_id="new"))
    config = StoreConfig(share=copy, node_id="new")
    gc.collect()
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    store = JournalStore.open(config, epoch=epoch, fencing_check=lambda: None)
    took = time.perf_counter() - started
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] if trace else 0
    tracemalloc.stop()
    store.close()
    return took, kept


def time_recover(share: Path, copy: Path) -> float:
    fresh_copy(share, copy)
    gc.collect()
    started = time.perf_counter()
    recover(journal_dir(copy), dedupe_window_messages=WINDOW, quarantine=True, log=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="opens (and recoveries) to time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="primacy-takeover-open-") as temporary:
        root = Path(temporary)
        share, copy = root / "share", root / "copy"
        print(f"building a journal: {WINDOW:,} ids, {PENDING:,} pending, a checkpoint", flush=True)
        build(share)
        opens, recoveries = [], []
        for run in range(args.runs):  # alternated, so drift in the machine's load hits both
            recoveries.append(time_recover(share, copy))
            opens.append(time_open(share, copy)[0])
            print(
                f"  run {run + 1}/{args.runs}: open {opens[-1] * 1000:.0f} ms, "
                f"recover alone {recoveries[-1] * 1000:.0f} ms",
                flush=True,
            )
        _, kept = time_open(share, copy, trace=True)
    open_ms, recover_ms = statistics.median(opens) * 1000, statistics.median(recoveries) * 1000
    print(
        f"JournalStore.open: median {open_ms:.0f} ms; recover alone: median {recover_ms:.0f} ms; "
        f"ratio {open_ms / recover_ms:.2f}; memory the open store keeps: {kept / 2**20:.1f} MiB"
    )


if __name__ == "__main__":
    main()
