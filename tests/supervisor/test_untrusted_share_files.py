"""Files other nodes write in the share are read warily: no hang, no crash, no forever."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict
from pathlib import Path

from primacy.share.layout import ShareLayout
from primacy.share.posix import PosixShare
from primacy.share.records import SWITCHOVER_TIMEOUT_S, NodeEntry, Switchover


def _entry(node_id: str, updated_unix_s: float) -> NodeEntry:
    return NodeEntry(node_id, "host", 1, "127.0.0.1:1", "normal", "master", 1, updated_unix_s)


def test_a_fifo_or_garbage_in_nodes_is_skipped_without_blocking(share: Path) -> None:
    port = PosixShare(share)
    port.publish_node(_entry("good", time.time()))
    os.mkfifo(port.layout.nodes / "fifo.json")
    (port.layout.nodes / "deep.json").write_text("[" * 100_000)
    (port.layout.nodes / "list.json").write_text("[1, 2]")
    found: list[list[NodeEntry]] = []
    reader = threading.Thread(target=lambda: found.append(port.node_entries()), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading the registry blocked on a FIFO"
    assert [entry.node_id for entry in found[0]] == ["good"]


def test_an_entry_stamped_in_the_future_is_not_live_forever() -> None:
    now = time.time()
    assert _entry("a", now - 1).is_live(now)
    assert _entry("a", now + 5).is_live(now)  # a clock a little ahead still counts
    assert not _entry("a", now + 10**9).is_live(now)
    assert not _entry("a", now - 11).is_live(now)


def test_a_switchover_marker_cannot_hold_the_group_back_past_its_timeout(share: Path) -> None:
    marker, port = ShareLayout(share).switchover_marker, PosixShare(share)
    honest = Switchover("a", "b", 3, time.time() + SWITCHOVER_TIMEOUT_S)
    marker.write_text(json.dumps(asdict(honest)))
    assert port.read_switchover() == honest
    forever = Switchover("a", "nobody", 3, time.time() + 10**9)
    marker.write_text(json.dumps(asdict(forever)))
    assert port.read_switchover() is None
    marker.write_text('{"from_node": "a", "to_node": "b", "epoch": 3, "until_unix_s": NaN}')
    assert port.read_switchover() is None
    marker.write_text("[" * 100_000)
    assert port.read_switchover() is None


def test_a_lock_job_that_raises_drops_the_lock_and_tells_the_role_loop(share: Path) -> None:
    """A lock attempt can take the lock and then meet garbage (a switchover marker it cannot
    parse, say). Before, the worker logged PRIMACY-1099 and posted nothing: the node held a
    lock its role loop did not know of, and the group had no master. Real lock, real files."""
    import queue

    from primacy.locker.lease import Lease
    from primacy.supervisor.config import NodeConfig
    from primacy.supervisor.machine.roles import LockResult
    from primacy.supervisor.shell.lock_io import LockIoWorker
    from primacy.supervisor.shell.share_jobs import ShareJobs

    config = NodeConfig(node_id="a", share=share, http="127.0.0.1:1")
    jobs = ShareJobs(config, PosixShare(share), clock=lambda: 0.0)
    posted: queue.Queue[object] = queue.Queue()
    worker = LockIoWorker(posted.put)

    def takes_the_lock_then_fails() -> None:
        assert jobs.lease.try_acquire()
        raise ValueError("garbage on the share")

    worker.submit(takes_the_lock_then_fails, jobs.lock_attempt_failed)
    event = posted.get(timeout=10)
    assert isinstance(event, LockResult) and not event.acquired
    assert event.error is not None and "garbage on the share" in event.error
    other = Lease(PosixShare(share), "b")
    assert other.try_acquire(), "the failed attempt kept the lock"
    other.abandon()
    assert worker.close(5)
