"""A new master serves while its takeover checkpoint is written, and promises nothing before it.

The checkpoint write is held here by wrapping ``write_checkpoint`` (a share that is slow
to take a few megabytes, which the FUSE fault tests show for real): what matters is
what a client of the new master is told, and when.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Any

import pytest

from primacy.share.layout import CHECKPOINTS_DIR_NAME
from primacy.share.posix import PosixShare
from primacy.share.records import EpochRecord
from primacy.store import journal as journal_module
from primacy.store.checkpoint import Checkpoint, list_checkpoints
from primacy.store.config import StoreConfig
from primacy.store.errors import JournalWriteFailed
from primacy.store.journal import JournalStore
from tests.harness.group import wait_until


def _journal_of_a_previous_master(share: Path) -> PosixShare:
    registry = PosixShare(share)
    epoch = registry.claim_epoch(EpochRecord(0, node_id="a"))
    with JournalStore.open(
        StoreConfig(share=share, node_id="a"), epoch=epoch, fencing_check=lambda: None
    ) as store:
        store.append_send("q", "from-a", b"1").result(timeout=5)
    return registry


def _open_new_master(share: Path, registry: PosixShare) -> JournalStore:
    epoch = registry.claim_epoch(EpochRecord(0, node_id="b"))
    return JournalStore.open(
        StoreConfig(share=share, node_id="b"), epoch=epoch, fencing_check=lambda: None
    )


def test_the_tenure_record_commits_before_the_checkpoint_and_no_client_is_told_before_it(
    share: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = _journal_of_a_previous_master(share)
    release = threading.Event()
    real_write = journal_module.write_checkpoint

    def held_write(directory: Path, checkpoint: Checkpoint) -> Path:
        assert release.wait(30), "the test never released the checkpoint"
        return real_write(directory, checkpoint)

    monkeypatch.setattr(journal_module, "write_checkpoint", held_write)
    store = _open_new_master(share, registry)
    try:
        # What the node waits for before serving is not held back by the checkpoint...
        store.append_control({"event": "role_change", "new": "master"}).result(timeout=5)
        # ...but a SEND's RECEIPT, an ACK's and a resend's are, though the records commit.
        send = store.append_send("q", "from-b", b"2")
        ack = store.append_ack("q", "from-a")
        resend = store.acknowledgeable()
        wait_until(lambda: store.stats().records_written >= 4, 5, "the records to commit")
        assert not (send.done() or ack.done() or resend.done())
        assert list_checkpoints(share / "journal" / CHECKPOINTS_DIR_NAME) == []
        release.set()
        assert send.result(timeout=5) > 0 and ack.result(timeout=5) > 0
        assert resend.result(timeout=5) == 0
    finally:
        release.set()
        store.close()
    newest = list_checkpoints(share / "journal" / CHECKPOINTS_DIR_NAME)[0]
    checkpoint = Checkpoint.from_bytes(newest.read_bytes(), 100)
    assert checkpoint.epoch == store.epoch and store.epoch in checkpoint.fences.fence_epochs


def test_a_takeover_checkpoint_that_cannot_be_written_fails_every_client_future(
    share: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = _journal_of_a_previous_master(share)

    def full_share(*_: Any) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_module, "write_checkpoint", full_share)
    store = _open_new_master(share, registry)
    try:
        with pytest.raises(JournalWriteFailed, match="takeover checkpoint was not written"):
            store.append_send("q", "from-b", b"2").result(timeout=5)
        with pytest.raises(JournalWriteFailed, match="No space left"):
            store.acknowledgeable().result(timeout=5)
    finally:
        store.close()


def test_a_first_master_has_no_takeover_checkpoint_to_wait_for(share: Path) -> None:
    registry = PosixShare(share)
    epoch = registry.claim_epoch(EpochRecord(0, node_id="a"))
    with JournalStore.open(
        StoreConfig(share=share, node_id="a"), epoch=epoch, fencing_check=lambda: None
    ) as store:
        assert store.acknowledgeable().done()
        store.append_send("q", "m", b"1").result(timeout=5)
    assert list_checkpoints(share / "journal" / CHECKPOINTS_DIR_NAME) == []
