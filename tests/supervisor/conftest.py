"""Fixtures of the supervisor's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
