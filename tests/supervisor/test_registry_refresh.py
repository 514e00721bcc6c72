"""The node's ``nodes/`` entry is refreshed on time whatever the broker does (issue 42, item 5).

Slaves take a master whose entry stops changing for ``stall_takeover_ms`` (as little as three
refreshes) for stalled and replace its lock file. The registry thread used to ask the broker
for its figures between two publications, a call that waits up to 2 s for a busy broker's
event loop: a master merely busy that long looked stalled. The figures are now gathered by
a thread of their own and each publication carries the last ones gathered.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from primacy.cli.localgroup import free_port
from primacy.share.memory import MemoryShare
from primacy.share.records import NodeEntry
from primacy.supervisor.shell.node_events import RegistryRead
from primacy.supervisor.shell.registry_loop import RegistryLoop
from tests.harness.group import wait_until
from tests.harness.memory_group import MemoryGroup

WAIT_S = 15.0  # a bound for a wait that succeeds in well under a second; never a pace
BROKER_STATS_WAIT_S = 2.0  # how long BrokerService.stats waits for its event loop


@dataclass(frozen=True)
class _Snapshot:
    """What the registry thread reads of the role loop's snapshot."""

    role: str = "MASTER"
    priority: str = "normal"
    epoch: int | None = 7


class _CountingPort:
    """A share port that counts this node's publications (the rest goes to the memory share)."""

    def __init__(self, share: MemoryShare) -> None:
        self._port = share.handle()
        self.published: list[NodeEntry] = []

    def publish_node(self, entry: NodeEntry) -> None:
        self._port.publish_node(entry)
        self.published.append(entry)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._port, name)


class _BlockedBroker:
    """A broker whose stats call blocks until released, as a busy event loop makes it wait."""

    FIGURES = {"running": True, "messages_in": 3}

    def __init__(self) -> None:
        self.called = threading.Event()
        self.release = threading.Event()

    def stats(self) -> dict[str, Any] | None:
        self.called.set()
        self.release.wait()
        return dict(self.FIGURES)


def test_the_entry_is_published_again_and_again_while_the_stats_call_blocks() -> None:
    port, broker, reads = _CountingPort(MemoryShare()), _BlockedBroker(), []
    loop = RegistryLoop(
        port,
        "a",
        "127.0.0.1:1",
        0.05,
        _Snapshot,
        broker.stats,
        reads.append,  # type: ignore[arg-type]
    )
    loop.start()
    try:
        assert broker.called.wait(WAIT_S), "the stats call was never made"
        published = len(port.published)
        # The old registry thread published once, then waited in the stats call for good.
        wait_until(lambda: len(port.published) >= published + 3, WAIT_S, "3 more publications")
        assert all(isinstance(read, RegistryRead) for read in reads)
        assert reads and reads[-1].broker_stats is None  # nothing gathered yet, nothing made up
        broker.release.set()
        wait_until(lambda: reads[-1].broker_stats == _BlockedBroker.FIGURES, WAIT_S, "the figures")
    finally:
        broker.release.set()
        loop.close(WAIT_S, final=False)


def test_close_ends_both_threads() -> None:
    broker = _BlockedBroker()
    broker.release.set()
    loop = RegistryLoop(
        _CountingPort(MemoryShare()),
        "a",
        "127.0.0.1:1",
        0.05,
        _Snapshot,
        broker.stats,
        [].append,  # type: ignore[arg-type]
    )
    loop.start()
    assert broker.called.wait(WAIT_S)
    loop.close(WAIT_S, final=True)
    assert not loop._thread.is_alive() and not loop._stats_thread.is_alive()


def test_a_master_whose_broker_loop_is_busy_keeps_its_entry_fresh(
    memory_group: MemoryGroup,
) -> None:
    node = memory_group.start("a", stomp=f"127.0.0.1:{free_port()}", registry_refresh_ms=100)
    memory_group.wait_for_master()
    serving = node.node._serving
    wait_until(lambda: serving.serving and serving._broker._loop is not None, WAIT_S, "the broker")
    broker_loop = serving._broker._loop
    busy, done = threading.Event(), threading.Event()

    def keep_busy() -> None:  # a handler that does not yield, on the broker's own loop
        busy.set()
        done.wait(WAIT_S * 2)

    broker_loop.call_soon_threadsafe(keep_busy)
    try:
        assert busy.wait(WAIT_S), "the broker's loop never ran the busy handler"
        share = memory_group.share.handle()
        seen: set[float] = set()

        def refreshed(times: int) -> bool:
            seen.update(e.updated_unix_s for e in share.node_entries() if e.node_id == "a")
            return len(seen) > times

        refreshed(0)
        started = time.monotonic()
        wait_until(lambda: refreshed(4), WAIT_S, "four refreshes of the entry", interval_s=0.005)
        took_s = time.monotonic() - started
        # The old thread waited the broker's 2 s between two publications: 4 took at least 6 s.
        assert took_s < BROKER_STATS_WAIT_S, f"4 refreshes of 100 ms took {took_s:.1f} s"
    finally:
        done.set()


class _PromotedBroker:
    """No figures until the node serves; then its figures, once released (a stats call
    that takes longer than the publication the promotion triggers)."""

    def __init__(self) -> None:
        self.serving = False
        self.release = threading.Event()

    def stats(self) -> dict[str, Any] | None:
        if not self.serving:
            return None
        self.release.wait(WAIT_S)
        return dict(_BlockedBroker.FIGURES)


def test_a_promotion_s_figures_are_published_without_waiting_a_refresh() -> None:
    """/status showed a new master's broker figures one refresh late (registry_refresh_ms,
    a second by default): the role change's publication carried the figures gathered
    before it. The gathering a role change asks for is now published when it is done."""
    port, broker, reads = _CountingPort(MemoryShare()), _PromotedBroker(), []
    loop = RegistryLoop(
        port,
        "a",
        "127.0.0.1:1",
        3600.0,  # no periodic refresh within the test: only what the promotion triggers
        _Snapshot,
        broker.stats,
        reads.append,  # type: ignore[arg-type]
    )
    loop.start()
    try:
        wait_until(lambda: len(reads) == 1, WAIT_S, "the first publication")
        broker.serving = True
        loop.wake()  # what the role loop does after starting the broker
        wait_until(lambda: len(reads) == 2, WAIT_S, "the role change's publication")
        assert reads[-1].broker_stats is None  # gathered before the broker served
        broker.release.set()
        wait_until(
            lambda: reads[-1].broker_stats == _BlockedBroker.FIGURES, WAIT_S, "the new figures"
        )
    finally:
        broker.release.set()
        loop.close(WAIT_S, final=False)
