"""Segments of epochs nobody claimed: set aside before a master opens the journal.

A master writes segments of its own epoch only, after claiming it: the exclusive
create of ``epochs/<E>``, synced before anything else (docs/safety.md). A new
master of epoch N that finds a segment of a later epoch E must refuse to write
(it is stale: a master of E fenced it), unless the segment provably is no
master's. The proof is the share's own: ``epochs/<E>`` does not exist, asked of
the authority (on NFS a single-name lookup the server answers), so no node has
claimed E, so no master of E has written anything, and none ever writes into a
file it did not create (segments are created ``O_EXCL``). Such a file was
planted (or copied in from another share): it is moved to ``quarantine/`` and
logged with its code, and the journal opens. Without that proof (the lookup
fails, the epoch exists, the file moved is not the one read) nothing is set
aside and the refusal stands: fencing is never weakened on absence of evidence.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from primacy.share.layout import QUARANTINE_DIR_NAME
from primacy.share.safe_io import move_into, open_regular, real_directory
from primacy.store import format as fmt
from primacy.store import messages
from primacy.store.errors import StaleEpoch
from primacy.store.segments import (
    NO_SCAN,
    SEGMENT_HEADER_MAX_BYTES,
    SegmentRef,
    check_batch_at,
    list_segments,
    open_segment,
    read_segment_head,
)

UNCLAIMED_SUFFIX = ".unclaimed"

EpochClaimed = Callable[[int], bool]


def set_aside_unclaimed(journal_dir: Path, epoch: int, epoch_claimed: EpochClaimed) -> list[str]:
    """Move every segment with a valid header of an epoch later than ``epoch`` that nobody
    claimed into ``quarantine/``; the names moved. OSError if an epoch cannot be looked up
    (the caller then refuses, as for a real later epoch); StaleEpoch if the file at a name
    changed while it was moved."""
    moved = []
    for segment in list_segments(journal_dir):
        if segment.epoch <= epoch:
            continue
        identity = _own_header_identity(segment)
        if identity is None:
            continue  # no master wrote it either way; it blocks nothing, recovery reports it
        if epoch_claimed(segment.epoch):
            continue  # a real later master: the caller refuses to write
        directory = _move(journal_dir, segment, identity)
        messages.log(
            logging.WARNING,
            messages.UNCLAIMED_EPOCH_SEGMENT,
            f"{segment.name} has a valid header of epoch {segment.epoch}, which no node has "
            f"claimed (no epochs/{segment.epoch}): no master wrote it. Moved to {directory}/ "
            f"as {segment.name}.*{UNCLAIMED_SUFFIX}; find out who can write the share "
            "(primacy doctor)",
        )
        moved.append(segment.name)
    return moved


def newest_written_epoch(journal_dir: Path) -> int:
    """The epoch of the newest segment holding, after an intact header of its epoch, an intact
    batch of that epoch (0 if none): what only a master writes, after its claim. A planted
    header alone (what ``set_aside_unclaimed`` is for) is no such evidence. Beside claims of
    lower epochs only, such a segment proves claims were lost (an ``epochs/`` restored apart
    from the journal): setting it aside would drop what its master receipted."""
    for segment in reversed(list_segments(journal_dir)):
        if _holds_a_batch_of_its_epoch(segment):
            return segment.epoch
    return 0


def _holds_a_batch_of_its_epoch(segment: SegmentRef) -> bool:
    try:
        with open_segment(segment.path, NO_SCAN) as source:
            header = fmt.decode_segment_header(read_segment_head(source))
            status, batch = check_batch_at(source, header.header_len)
    except (OSError, fmt.FormatError):
        return False
    return (
        header.epoch == segment.epoch
        and status is fmt.BatchStatus.OK
        and batch is not None
        and batch.epoch == segment.epoch
    )


def _own_header_identity(segment: SegmentRef) -> tuple[int, int] | None:
    """(device, inode) of the segment's file if it starts with an intact header of the epoch
    its name says; None for anything else (unreadable, not a regular file, no header)."""
    try:
        fd = open_regular(segment.path)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        head = os.pread(fd, SEGMENT_HEADER_MAX_BYTES, 0)
        if fmt.decode_segment_header(head).epoch != segment.epoch:
            return None
    except (OSError, fmt.FormatError):
        return None
    finally:
        os.close(fd)
    return info.st_dev, info.st_ino


def _move(journal_dir: Path, segment: SegmentRef, identity: tuple[int, int]) -> Path:
    """Where the segment now is: ``quarantine/``, or the journal directory itself under a name
    that is not a segment's if ``quarantine`` is unusable (a symlink planted there must not
    turn a planted segment back into a group without a master). The name holds the inode and
    the time, so a file planted under the name cannot stop the move either."""
    try:
        directory = real_directory(journal_dir / QUARANTINE_DIR_NAME)
    except OSError:
        directory = journal_dir
    name = f"{segment.name}.{identity[1]}.{time.time_ns()}{UNCLAIMED_SUFFIX}"
    try:
        moved = move_into(segment.path, directory, name)
    except FileNotFoundError:
        return directory  # another node set it aside first
    if (moved.st_dev, moved.st_ino) != identity:
        # Not the file whose header was read: the name was bound anew in between. Put it
        # back and claim nothing about it.
        move_into(directory / name, journal_dir, segment.name)
        raise StaleEpoch(f"{segment.name} changed while it was being set aside; claim a new epoch")
    return directory
