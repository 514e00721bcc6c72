"""Fixtures: in-process masters on a temporary share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker.nodes import Masters


@pytest.fixture
def masters(tmp_path: Path) -> Iterator[Masters]:
    share = tmp_path / "share"
    share.mkdir()
    started = Masters(share)
    try:
        yield started
    finally:
        started.close()
