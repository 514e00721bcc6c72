"""Epochs: fencing tokens claimed by exclusive create of ``epochs/N`` in the share.

Exclusive create is atomic on local filesystems, GFS2 and NFSv4, so two nodes
can never hold the same epoch, even when both believe they hold the lock.
Epochs are claimed in order without gaps, so a master of epoch N is current
exactly while the single name ``epochs/N+1`` does not exist: one lookup, which
NFSv4 mounted with ``lookupcache=none`` always sends to the server (a directory
listing might be answered from cache, so listings are only ever a hint).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from primacy.locker.share_io import (
    create_exclusive,
    create_new_file,
    exists_in,
    fsync_directory,
    name_exists,
    names_in,
    real_directory,
    replace_within,
)
from primacy.locker.untrusted import read_small_file

EPOCH_DIR_NAME = "epochs"
# Epochs are u64 wherever they are written (journal headers); past this a share is refused.
MAX_EPOCH = 2**63 - 1
# An epoch record is a small JSON object; anything larger is not one of ours.
MAX_RECORD_BYTES = 64 * 1024


def parse_epoch_name(name: str) -> int | None:
    """The epoch an ``epochs/`` entry names, or None: only canonical ASCII digits count.

    The share is untrusted input: ``²`` passes ``str.isdigit`` but not ``int``, ``007``
    and ``+7`` are not names a node writes, and an absurd number is refused.
    """
    if not (name.isascii() and name.isdigit()) or (name.startswith("0") and name != "0"):
        return None
    epoch = int(name)
    return epoch if 0 < epoch <= MAX_EPOCH else None


class EpochRegistry:
    """The ``epochs/`` directory of one share."""

    def __init__(self, share: Path) -> None:
        self.directory = Path(share) / EPOCH_DIR_NAME

    def ensure_directory(self) -> None:
        real_directory(self.directory)

    def latest_hint(self) -> int:
        """The highest epoch a listing shows (0 if none). A hint: listings may be cached."""
        return max(self._listed(), default=0)

    def latest(self) -> int:
        """The highest claimed epoch, confirmed by single-name lookups past the hint."""
        epoch = self.latest_hint()
        while self.exists(epoch + 1):
            epoch += 1
        return epoch

    def claimed_before(self, epoch: int) -> Iterator[int]:
        """The claimed epochs below ``epoch``, newest first.

        Epochs are claimed without gaps, so each is looked up by name (what NFS
        answers exactly). Where a name is missing, which only a planted entry far
        above the rest can cause, the walk jumps to the highest epoch a listing shows
        below it instead of counting down one by one (an empty ``epochs/9999999999``
        once meant ten billion lookups).
        """
        candidate = epoch - 1
        listed: list[int] | None = None
        while candidate >= 1:
            if self.exists(candidate):
                yield candidate
                candidate -= 1
                continue
            if listed is None:
                listed = sorted(self._listed(), reverse=True)
            candidate = next((e for e in listed if e < candidate), 0)

    def _listed(self) -> list[int]:
        names = names_in(self.directory)
        return [epoch for name in names if (epoch := parse_epoch_name(name)) is not None]

    def exists(self, epoch: int) -> bool:
        return name_exists(self.directory, str(epoch))  # no path built: the lease's check

    def is_current(self, epoch: int) -> bool:
        """True while no later epoch has been claimed. I/O errors propagate (they count as loss)."""
        return not self.exists(epoch + 1)

    def claim_next(self, holder: dict[str, Any]) -> int:
        """Claim the next free epoch with O_CREAT|O_EXCL, durably, and return it."""
        self.ensure_directory()
        epoch = self.latest_hint() + 1
        while True:
            if epoch > MAX_EPOCH:
                raise OSError(f"no epoch left to claim in {self.directory} (past {MAX_EPOCH})")
            path = self.directory / str(epoch)
            try:
                fd = create_exclusive(path)  # taken by anything at all: the next number
            except FileExistsError:
                epoch += 1
                continue
            try:
                os.write(
                    fd, (json.dumps({"epoch": epoch, **holder}, sort_keys=True) + "\n").encode()
                )
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_directory(self.directory)
            return epoch

    def rewrite(self, epoch: int, record: dict[str, Any]) -> None:
        """Replace the record of an epoch this node owns (its content, never its existence).

        Written to a temporary name and renamed over the record, so a reader sees
        the old record or the new one, never an empty or partial one (a claimant
        of the next epoch reads it to learn how long to wait).
        """
        path = self.directory / str(epoch)
        if not exists_in(path):  # the epoch must already be ours: never create it here
            raise FileNotFoundError(errno.ENOENT, f"epoch {epoch} was never claimed", str(path))
        temporary = self.directory / f".{epoch}.{os.getpid()}.tmp"  # not a digit name
        fd = create_new_file(temporary)  # a planted symlink there is removed, never followed
        try:
            data = (json.dumps({**record, "epoch": epoch}, sort_keys=True) + "\n").encode()
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        replace_within(temporary, path)
        fsync_directory(self.directory)

    def read(self, epoch: int) -> dict[str, Any] | None:
        """The record written by whoever claimed ``epoch`` (None if absent or unreadable)."""
        try:
            data = read_small_file(self.directory / str(epoch), MAX_RECORD_BYTES)
            record = json.loads(data.decode())
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            return None
        return record if isinstance(record, dict) else None
