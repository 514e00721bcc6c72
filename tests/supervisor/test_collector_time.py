"""The time garbage collections hold the interpreter is measured, and the role machine hears it
(supervisor/shell/collector_time.py; what the machine does with it: test_roles_master.py)."""

from __future__ import annotations

import gc
import itertools

from primacy.supervisor.shell.collector_time import CollectorTime
from primacy.supervisor.shell.node import Node
from tests.harness.group import wait_until


def test_every_collection_is_counted_from_its_start_to_its_end() -> None:
    ticks = itertools.count()  # each read of the clock one second later
    collector = CollectorTime(lambda: float(next(ticks)))
    gc.disable()  # only the collections below
    try:
        collector.install()
        collector.install()  # once is once
        for _ in range(3):
            gc.collect()
        collector.uninstall()
        gc.collect()
    finally:
        gc.enable()
    assert collector.total_s == 3.0


def test_a_node_tells_its_role_machine_how_long_collections_took(slave_node: Node) -> None:
    before = slave_node.machine.collecting_s
    garbage = [[n] for n in range(200_000)]  # a collection with something to scan
    gc.collect()
    del garbage
    wait_until(lambda: slave_node.machine.collecting_s > before, 10, "the machine to hear it")


def test_a_stopped_node_leaves_no_callback_behind(slave_node: Node) -> None:
    assert _measuring()
    slave_node.request_stop("test over")
    wait_until(lambda: not _measuring(), 15, "the node to stop measuring")


def _measuring() -> bool:
    return any(isinstance(getattr(c, "__self__", None), CollectorTime) for c in gc.callbacks)
