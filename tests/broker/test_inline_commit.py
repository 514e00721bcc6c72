"""One producer's SENDs committed on the broker's loop thread, without a hand-off to the
journal writer: the RECEIPT still comes only after the record's fdatasync and fencing check."""

from __future__ import annotations

import threading

import pytest

from primacy.share.posix import PosixShare
from primacy.share.records import EpochRecord
from primacy.store.writer import SegmentFile
from tests.broker.nodes import Masters, eventually
from tests.broker.stomppy import Collector, StompPy


def test_a_lone_send_is_committed_on_the_loop_and_receipted_after_its_sync_and_fence(
    masters: Masters, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str]] = []  # (what, thread), in the order they happened
    real_sync, real_check = SegmentFile.sync, masters.lease.revalidate

    def sync(self: SegmentFile) -> None:
        real_sync(self)
        events.append(("sync", threading.current_thread().name))

    def fencing_check() -> None:
        real_check()
        events.append(("fence", threading.current_thread().name))

    def on_receipt(self: Collector, frame: object) -> None:
        events.append(("receipt", "client"))
        real_on_receipt(self, frame)

    real_on_receipt = Collector.on_receipt
    monkeypatch.setattr(SegmentFile, "sync", sync)
    monkeypatch.setattr(Collector, "on_receipt", on_receipt)
    monkeypatch.setattr(masters.lease, "revalidate", fencing_check)
    master = masters.start(inline_commit_quiet_s=0.5)  # off by default (store/config.py)
    producer = StompPy(master.address)
    events.clear()  # the open's fence record and CONNECT
    for n in range(5):
        assert producer.send("/queue/a", "x" * 1024, **{"message-id": f"m-{n}"})
    writer = master.store._writer
    assert writer is not None and writer.inline_commits == 5  # every one on the loop
    # Each RECEIPT after its record's sync then fencing check, both on the loop's thread.
    on_loop = [("sync", "primacy-broker"), ("fence", "primacy-broker"), ("receipt", "client")]
    assert events == on_loop * 5
    producer.close()


def test_a_fenced_inline_commit_sends_no_receipt(masters: Masters) -> None:
    master = masters.start(inline_commit_quiet_s=0.5)  # off by default (store/config.py)
    producer = StompPy(master.address)
    assert producer.send("/queue/a", "before", **{"message-id": "m-0"})
    writer = master.store._writer
    assert writer is not None and writer.inline_commits == 1
    # Another node claims the next epoch: this master's next fencing check fails, inline.
    PosixShare(masters.share).claim_epoch(EpochRecord(0, node_id="node-b"))
    assert not producer.send("/queue/a", "after", **{"message-id": "m-1"})
    assert len(producer.listener.receipts) == 1  # only the send before the fence
    assert writer.inline_commits == 2  # the fenced one was tried on the loop too
    eventually(lambda: master.fatal != [], "on_fatal is called")
    assert "JournalFenced" in master.fatal[0]
    producer.close()
