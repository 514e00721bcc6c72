"""The follower's reads of the share: one followed segment, its tail, sealed segments, checkpoints.

Helpers of ``store/follower.py``, which says what following means and when a state is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from primacy.share.followed_files import FileIdentity, FollowedFiles, RevalidatedFile
from primacy.share.layout import CHECKPOINTS_DIR_NAME
from primacy.store.checkpoint import list_checkpoints
from primacy.store.segments import SegmentRef


class FollowerFellBack(Exception):
    """The followed state can no longer be trusted; the message says why."""


@dataclass
class Followed:
    """One segment as far as it was applied."""

    ref: SegmentRef
    identity: FileIdentity  # another file under the name is not ours
    header: bytes  # its segment header, so a poll does not read the segment's start again
    position: int  # end of the last batch applied (or of the header)
    last_batch: tuple[int, int] | None  # (offset, CRC32C) of the last batch applied
    size: int  # at the last poll
    sealed: bool = False  # read to its end after a later segment of its epoch was listed
    # Its first batch was read, and any fence in it is in the follower's fence table (recovery
    # at takeover need not read it again): set by a start past it, or a first batch read here
    # with no fence record in it.
    fence_read: bool = False


class TailSource:
    """A segment read from a position on, through one revalidated open (the share port's,
    ``share/followed_files.py``): the header comes from what was read when the segment was
    first seen, so a poll reads only new bytes."""

    def __init__(self, file: RevalidatedFile, header: bytes) -> None:
        self._file = file
        self.size: int = file.size
        self._header = header

    def read(self, offset: int, length: int) -> bytes | memoryview:
        if offset == 0 and length >= len(self._header):
            return self._header
        if offset + length <= len(self._header):  # a piece of it (``read_segment_head``)
            return memoryview(self._header)[offset : offset + length]
        data: bytes | memoryview = self._file.read(offset, length)
        return data


def check_sealed(files: FollowedFiles, followed: Followed) -> None:
    """A segment read whole is still the file it was, as long as it was."""
    info = files.stat(followed.ref.path)
    if info is None:
        return  # retired: the listing's business
    if info.identity != followed.identity:
        raise FollowerFellBack(f"segment {followed.ref.name} was replaced under the follower")
    if info.size != followed.size:
        raise FollowerFellBack(
            f"segment {followed.ref.name}, read whole at {followed.size} bytes, is now {info.size}"
        )


def identity_of(files: FollowedFiles, ref: SegmentRef) -> FileIdentity | None:
    try:
        info = files.stat(ref.path)
    except OSError:
        return None
    return info.identity if info is not None else None


def newest_checkpoint_sequence(journal_dir: Path) -> int:
    """The last sequence the newest checkpoint's name gives (0 if none)."""
    found = list_checkpoints(journal_dir / CHECKPOINTS_DIR_NAME)
    return int(found[0].name.split("-")[1]) if found else 0
