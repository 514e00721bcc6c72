"""A master's status snapshot built the way a node builds it, from real parts, in-process."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.api.snapshot import StatusSnapshot
from primacy.share.posix import PosixShare
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.machine.roles import RoleMachine
from primacy.supervisor.shell.node_events import RegistryRead
from primacy.supervisor.shell.registry_loop import RegistryLoop
from primacy.supervisor.shell.status import NodeState, build_snapshot
from tests.broker.nodes import Masters, RawClient
from tests.harness.group import wait_until


@pytest.fixture
def master_snapshot(tmp_path: Path) -> Iterator[StatusSnapshot]:
    """A snapshot with every record present: an open journal, a broker that stored three
    messages on two queues and delivered one, and the registry thread's read of the share."""
    share = tmp_path / "share"
    share.mkdir()
    masters = Masters(share)
    try:
        master = masters.start(segment_max_bytes=65536)
        client = RawClient(master.address)
        client.connect()
        client.send("SUBSCRIBE", {"destination": "/queue/q", "id": "s1"})
        for receipt in ("r1", "r2"):
            client.send("SEND", {"destination": "/queue/idle", "receipt": receipt}, b"kept")
        client.send("SEND", {"destination": "/queue/q", "receipt": "r3"}, b"hello")
        frames = sorted(client.read().command for _ in range(4))
        assert frames == ["MESSAGE", "RECEIPT", "RECEIPT", "RECEIPT"]
        config = NodeConfig(node_id="node-a", share=share, stomp="127.0.0.1:61613")
        machine = RoleMachine(config.timings(), config.node_priority)
        state = NodeState(since_unix_s=time.time(), first_lock_attempt_done=True)
        state.store = master.store
        reads: list[RegistryRead] = []
        published = StatusSnapshot(
            node="node-a", role="master", epoch=master.store.epoch, since_unix_s=0, priority="high"
        )
        registry = RegistryLoop(
            PosixShare(share),
            "node-a",
            config.http,
            60.0,
            lambda: published,
            master.service.stats,
            reads.append,
        )
        registry.start()
        # The entry carries the figures the stats thread last gathered (it never waits on
        # the broker): let it gather once before the last publication.
        wait_until(lambda: registry._last_stats is not None, 10, "the broker's figures")
        registry.close(timeout_s=5, final=True)  # the final publication is one more read
        state.saw_registry(reads[-1].cluster, reads[-1].broker_stats)
        yield build_snapshot(config, machine, state, time.monotonic(), "test", None)
        client.sock.close()
    finally:
        masters.close()
