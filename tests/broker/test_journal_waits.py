"""A batch's waiters are handed to the event loop in one wake-up, not one per record.

Counted, not timed: the writer is held between batches (a job on its thread that
waits), so every record submitted meanwhile lands in one batch; the loop then
wakes once for all of them. And with real stomp.py producers, the broker's
``journal_wakeups`` never exceeds the journal's ``batches_written``.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import stomp

from primacy.broker.journal_waits import JournalWaits
from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore
from tests.broker.nodes import Masters

RECORDS = 50


def _held_writer(store: JournalStore) -> threading.Event:
    """Keep the writer thread busy until the returned event is set."""
    release = threading.Event()
    started = threading.Event()

    def hold() -> None:
        started.set()
        release.wait(30)

    store._require_writer().call(hold)
    assert started.wait(10)
    return release


def test_fifty_records_in_one_batch_wake_the_loop_once(tmp_path: Path) -> None:
    store = JournalStore.open(
        StoreConfig(share=tmp_path, node_id="n1"), epoch=1, fencing_check=lambda: None
    )

    async def main() -> tuple[list[int], int]:
        waits = JournalWaits(asyncio.get_running_loop())
        store.add_completion_listener(waits.batch_done)
        release = _held_writer(store)
        batches_before = store.stats().batches_written
        futures = [
            waits.watch(store.append_send(f"/queue/q{n % 3}", f"m{n}", b"x" * 100))
            for n in range(RECORDS)
        ]
        release.set()
        sequences = list(await asyncio.gather(*futures))
        assert store.stats().batches_written == batches_before + 1  # all in one batch
        return sequences, waits.wakeups

    try:
        sequences, wakeups = asyncio.run(main())
    finally:
        store.close()
    assert sequences == sorted(sequences) and len(set(sequences)) == RECORDS
    assert wakeups == 1


def test_a_failed_batch_wakes_the_loop_once_with_every_error(tmp_path: Path) -> None:
    checks = {"fail": False}

    def fencing_check() -> None:
        if checks["fail"]:
            raise RuntimeError("another node claimed epoch 2")

    store = JournalStore.open(
        StoreConfig(share=tmp_path, node_id="n1"), epoch=1, fencing_check=fencing_check
    )

    async def main() -> tuple[list[BaseException | int], int]:
        waits = JournalWaits(asyncio.get_running_loop())
        store.add_completion_listener(waits.batch_done)
        release = _held_writer(store)
        futures = [
            waits.watch(store.append_send("/queue/q", f"m{n}", b"x")) for n in range(RECORDS)
        ]
        checks["fail"] = True
        release.set()
        results = await asyncio.gather(*futures, return_exceptions=True)
        return results, waits.wakeups

    try:
        results, wakeups = asyncio.run(main())
    finally:
        store.close()
    assert all(type(r).__name__ == "JournalFenced" for r in results), results[:3]
    assert wakeups == 1


def test_a_write_acknowledged_at_submit_needs_no_wake_up(tmp_path: Path) -> None:
    store = JournalStore.open(
        StoreConfig(share=tmp_path, node_id="n1", sync_policy=SyncPolicy.NO_SYNC),
        epoch=1,
        fencing_check=lambda: None,
    )

    async def main() -> tuple[int, int]:
        waits = JournalWaits(asyncio.get_running_loop())
        store.add_completion_listener(waits.batch_done)
        # no_sync acknowledges at submit: done before it is watched, on the loop's thread.
        sequence = await waits.watch(store.append_send("/queue/q", "m", b"x"))
        return sequence, waits.wakeups

    try:
        sequence, wakeups = asyncio.run(main())
    finally:
        store.close()
    assert sequence > 0 and wakeups == 0


def test_stomppy_producers_never_cost_more_wakeups_than_batches(masters: Masters) -> None:
    master = masters.start()
    producers, each = 8, 40

    def produce(slot: int) -> None:
        receipts = threading.Semaphore(0)

        class Listener(stomp.ConnectionListener):  # type: ignore[misc]
            def on_receipt(self, frame: object) -> None:
                receipts.release()

        connection = stomp.Connection12([master.address])
        connection.set_listener("", Listener())
        connection.connect(wait=True)
        for number in range(each):
            connection.send("/queue/q", "x" * 1024, headers={"receipt": f"{slot}-{number}"})
            assert receipts.acquire(timeout=30)
        connection.disconnect()

    threads = [threading.Thread(target=produce, args=(slot,)) for slot in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    stats, journal = master.service.stats(), master.store.stats()
    assert stats["messages_in"] == producers * each
    assert 0 < stats["journal_wakeups"] <= journal.batches_written
