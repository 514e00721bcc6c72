"""Helpers for the journal store tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore


def no_fencing_check() -> None:
    """A fencing check for tests where only one master exists."""


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[..., JournalStore]]:
    """Open stores on one share; every one still open is closed at the end."""
    opened: list[JournalStore] = []

    def _open(
        epoch: int = 1, check: Callable[[], None] = no_fencing_check, **settings: object
    ) -> JournalStore:
        settings.setdefault("share", tmp_path / "share")
        settings.setdefault("node_id", "node-a")
        config = StoreConfig(**settings)  # type: ignore[arg-type]
        store = JournalStore.open(config, epoch=epoch, fencing_check=check)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


__all__ = ["SyncPolicy", "no_fencing_check"]
