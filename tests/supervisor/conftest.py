"""Fixtures of the supervisor's tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.supervisor.config import NodeConfig
from primacy.supervisor.shell.node import Node
from tests.harness.group import free_port, wait_until
from tests.harness.memory_group import MemoryGroup


@pytest.fixture
def memory_group(tmp_path: Path) -> Iterator[MemoryGroup]:
    """Nodes in this process on an in-memory share, their journal in ``tmp_path``; every node
    closed at the end."""
    journal = tmp_path / "share"
    journal.mkdir()
    group = MemoryGroup(journal)
    try:
        yield group
    finally:
        group.close()


@pytest.fixture
def slave_node(share: Path) -> Iterator[Node]:
    """A running in-process node of priority never: a slave that stays one."""
    node = Node(
        NodeConfig(node_id="n1", share=share, http=f"127.0.0.1:{free_port()}", priority="never")
    )
    runner = threading.Thread(target=node.run, name="test-role-loop")
    runner.start()
    try:
        wait_until(lambda: node.snapshot().role == "slave", 10, "the node to start")
        yield node
    finally:
        node.request_stop("test over")
        runner.join(15)
    assert not runner.is_alive()
