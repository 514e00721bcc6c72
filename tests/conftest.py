"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.group import Group


@pytest.fixture
def share(tmp_path: Path) -> Path:
    directory = tmp_path / "share"
    directory.mkdir()
    return directory


@pytest.fixture
def group(share: Path, tmp_path: Path) -> Iterator[Group]:
    """A group of real supervisor processes; every one is killed by pid at the end."""
    logs = tmp_path / "logs"
    logs.mkdir()
    started = Group(share=share, log_dir=logs)
    try:
        yield started
    finally:
        started.close()
