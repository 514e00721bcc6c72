"""One producer's SENDs committed on the broker's loop thread (the default), without a hand-off
to the journal writer: the RECEIPT still comes only after the record's fdatasync and fencing
check, and a stop while the loop hangs in such a commit still closes every connection."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from primacy.share.posix import PosixShare
from primacy.share.records import EpochRecord
from primacy.store.writer import SegmentFile
from tests.broker.nodes import Masters, RawClient, eventually
from tests.broker.stomppy import Collector, StompPy

# No idle checkpoint step between these tests' sends: the writer thread takes the segment for
# it once a second of quiet has passed (a slow CI machine's connect takes that long), and a
# send that comes meanwhile is rightly handed to the writer, which is not what they count.
NO_IDLE_STEP = {"checkpoint_idle_s": 3600.0}


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
    master = masters.start(**NO_IDLE_STEP)  # inline commits on: the default (store/config.py)
    writer = master.store._writer
    assert writer is not None
    # The open's fence was committed by the writer thread, which may not have left that step.
    eventually(lambda: not writer.busy, "the writer to be idle")
    producer = StompPy(master.address)
    events.clear()  # the open's fence record and CONNECT
    for n in range(5):
        assert producer.send("/queue/a", "x" * 1024, **{"message-id": f"m-{n}"})
    assert writer.inline_commits == 5  # every one on the loop
    # Each RECEIPT after its record's sync then fencing check, both on the loop's thread.
    on_loop = [("sync", "primacy-broker"), ("fence", "primacy-broker"), ("receipt", "client")]
    assert events == on_loop * 5
    producer.close()


def test_a_fenced_inline_commit_sends_no_receipt(masters: Masters) -> None:
    master = masters.start(**NO_IDLE_STEP)
    writer = master.store._writer
    assert writer is not None
    eventually(lambda: not writer.busy, "the writer to be idle after the open's fence")
    producer = StompPy(master.address)
    assert producer.send("/queue/a", "before", **{"message-id": "m-0"})
    assert writer.inline_commits == 1
    # Another node claims the next epoch: this master's next fencing check fails, inline.
    PosixShare(masters.share).claim_epoch(EpochRecord(0, node_id="node-b"))
    assert not producer.send("/queue/a", "after", **{"message-id": "m-1"})
    assert len(producer.listener.receipts) == 1  # only the send before the fence
    assert writer.inline_commits == 2  # the fenced one was tried on the loop too
    eventually(lambda: master.fatal != [], "on_fatal is called")
    assert "JournalFenced" in master.fatal[0]
    producer.close()


def test_a_stop_while_the_loop_hangs_in_a_commit_closes_every_connection(
    masters: Masters, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A fencing check that does not return while the test holds it stands in for a hung
    # share (tests/fault/test_hung_share_connections.py hangs a real one, under FUSE).
    entered, release = threading.Event(), threading.Event()
    real_check = masters.lease.revalidate

    def hanging_check() -> None:
        if threading.current_thread().name == "primacy-broker":
            entered.set()
            release.wait(30)
        real_check()

    monkeypatch.setattr(masters.lease, "revalidate", hanging_check)
    master = masters.start(**NO_IDLE_STEP)
    writer = master.store._writer
    assert writer is not None
    eventually(lambda: not writer.busy, "the writer to be idle after the open's fence")
    sender, idle = RawClient(master.address), RawClient(master.address)
    assert sender.connect().command == idle.connect().command == "CONNECTED"
    sender.send("SEND", {"destination": "/queue/a", "receipt": "r-1"}, b"x")
    assert entered.wait(10), "the SEND was not committed on the loop"
    caplog.set_level(logging.WARNING, logger="primacy.broker")
    stopper = threading.Thread(target=master.service.stop, name="stopper")
    try:
        stopper.start()
        # Closed for both clients while the loop still hangs (a 5 s socket timeout if not).
        frames = [client.read_until_closed() for client in (sender, idle)]
        assert not release.is_set()
        assert [f.command for f in frames[0] + frames[1]] == []  # no RECEIPT, no ERROR
        stopper.join(10)
        assert not stopper.is_alive(), "stop() waited for the hung loop"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(master.address, timeout=5).close()
        assert "PRIMACY-1580" in caplog.text
    finally:
        release.set()
        sender.close()
        idle.close()
    thread = master.service._thread
    assert thread is not None
    eventually(lambda: not thread.is_alive(), "the loop's thread to end once the commit returns")
