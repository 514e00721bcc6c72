"""Journal benchmark: SYNC group commit against a raw fdatasync baseline; recovery time.

Run: ``.venv/bin/python bench/journal.py [--dir DIR] [--quick]``. Prints figures;
asserts nothing. The raw baseline writes the very batch sizes the 64-appender
run produced, one ``os.write`` plus one ``fdatasync`` each, with no framing,
no CRC, no threads: what the disk can do for that write pattern.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primacy.share.layout import journal_dir
from primacy.store import format as fmt
from primacy.store.bulk import append_sends
from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from primacy.store.segments import list_segments

RECORD_PAYLOAD = b"p" * 1024


def sync_throughput(
    share: Path, appenders: int, duration_s: float, per_call: int = 0
) -> tuple[float, list[int], int]:
    """Records per second with ``appenders`` threads each waiting on its own append; batch sizes.
    ``per_call``: each appender hands over that many records per call (store/bulk.py)."""
    config = StoreConfig(share=share, node_id="bench", sync_policy=SyncPolicy.SYNC)
    store = JournalStore.open(config, epoch=1, fencing_check=lambda: None)
    stop = threading.Event()
    counts = [0] * appenders

    def append(worker: int) -> None:
        while not stop.is_set():
            if per_call:
                n = counts[worker]
                sends = [
                    ("bench", f"{worker}-{n + k}", RECORD_PAYLOAD, None) for k in range(per_call)
                ]
                append_sends(store, sends).result()
                counts[worker] += per_call
                continue
            store.append_send("bench", f"{worker}-{counts[worker]}", RECORD_PAYLOAD).result()
            counts[worker] += 1

    threads = [threading.Thread(target=append, args=(n,)) for n in range(appenders)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(duration_s)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    store.close()
    sizes, records = batch_sizes(share)
    return sum(counts) / elapsed, sizes, records


def batch_sizes(share: Path) -> tuple[list[int], int]:
    """Byte length of every data batch written, and how many records they hold."""
    sizes, records = [], 0
    for segment in list_segments(journal_dir(share)):
        data = segment.path.read_bytes()
        offset = fmt.decode_segment_header(data).header_len
        while offset < len(data):
            _, header = fmt.check_batch(data, offset)
            assert header is not None
            if header.first_sequence > 1:  # leave out the fence batch
                sizes.append(header.batch_len)
                records += header.record_count
            offset += header.batch_len
    return sizes, records


def raw_baseline(directory: Path, sizes: list[int]) -> float:
    """Seconds to write ``sizes`` bytes batch by batch, one fdatasync per batch."""
    path = directory / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    buffers = {size: b"r" * size for size in set(sizes)}
    started = time.perf_counter()
    for size in sizes:
        os.write(fd, buffers[size])
        os.fdatasync(fd)
    elapsed = time.perf_counter() - started
    os.close(fd)
    path.unlink()
    return elapsed


def recovery_times(share: Path, records: int) -> tuple[float, float, int]:
    """Recovery seconds without and with a checkpoint (taken 1% before the end), bytes on disk."""
    config = StoreConfig(
        share=share,
        node_id="bench",
        sync_policy=SyncPolicy.NO_SYNC,
        checkpoint_interval_records=10**12,
        retention_max_age_s=None,
    )
    store = JournalStore.open(config, epoch=1, fencing_check=lambda: None)
    checkpoint_at = records - max(records // 100, 1)
    payload = b"m" * 256
    last = None
    for n in range(records // 2):  # a send, then an ack of the send 100 before it
        store.append_send("q", f"m{n}", payload)
        last = store.append_ack("q", f"m{n - 100}") if n >= 100 else None
        if 2 * n <= checkpoint_at < 2 * n + 2:
            store.checkpoint().result()
    if last is not None:
        last.result()
    store.close()
    size = sum(s.path.stat().st_size for s in list_segments(journal_dir(share)))
    os.sync()
    started = time.perf_counter()
    full = recover(journal_dir(share), use_checkpoint=False, log=False)
    without = time.perf_counter() - started
    started = time.perf_counter()
    quick = recover(journal_dir(share), use_checkpoint=True, log=False)
    with_checkpoint = time.perf_counter() - started
    assert quick.state.summary() == full.state.summary()
    return without, with_checkpoint, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: temp dir)")
    parser.add_argument("--quick", action="store_true", help="shorter runs, smaller journals")
    parser.add_argument("--per-call", type=int, default=16, help="records per bulk append")
    parser.add_argument("--only-appenders", action="store_true", help="no recovery figures")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="primacy-bench-", dir=args.dir))
    duration_s = 2.0 if args.quick else 5.0
    try:
        print(f"journal benchmark in {base} ({os.cpu_count()} cores), 1 KiB records, SYNC")
        rate_1, _, _ = sync_throughput(base / "one", 1, duration_s)
        print(f"  SYNC,  1 appender : {rate_1:10.0f} records/s  {rate_1 / 1024:8.1f} MiB/s")
        rate_64, sizes, records = sync_throughput(base / "many", 64, duration_s)
        raw_s = raw_baseline(base, sizes)
        raw_rate = records / raw_s
        per_batch = sum(sizes) / len(sizes)
        print(
            f"  SYNC, 64 appenders: {rate_64:10.0f} records/s  {rate_64 / 1024:8.1f} MiB/s  "
            f"({len(sizes)} batches, {records / len(sizes):.1f} records = "
            f"{per_batch / 1024:.1f} KiB per batch on average)"
        )
        print(
            f"  raw write+fdatasync, same batches: {raw_rate:10.0f} records/s  "
            f"{sum(sizes) / raw_s / 2**20:8.1f} MiB/s  ({len(sizes) / raw_s:.0f} fdatasync/s)"
        )
        print(f"  ratio SYNC 64 / raw: {rate_64 / raw_rate:.2f} (target >= 0.50)")
        bulk, bulk_sizes, bulk_records = sync_throughput(
            base / "bulk", 64, duration_s, per_call=args.per_call
        )
        bulk_raw = bulk_records / raw_baseline(base, bulk_sizes)
        print(
            f"  SYNC, 64 appenders, {args.per_call} records per call (store/bulk.py): "
            f"{bulk:10.0f} records/s ({len(bulk_sizes)} batches, "
            f"{bulk_records / len(bulk_sizes):.1f} records per batch); raw, same batches: "
            f"{bulk_raw:10.0f} records/s; ratio {bulk / bulk_raw:.2f} (target >= 0.50)"
        )
        if args.only_appenders:
            return
        sizes_to_try = [1_000, 10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
        print("recovery (256-byte payloads, half sends, half acks, checkpoint 1% before the end)")
        for count in sizes_to_try:
            without, with_checkpoint, size = recovery_times(base / f"rec{count}", count)
            print(
                f"  {count:>9} records ({size / 2**20:7.1f} MiB): full scan {without:7.3f} s, "
                f"from checkpoint {with_checkpoint:7.3f} s"
            )
            shutil.rmtree(base / f"rec{count}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
