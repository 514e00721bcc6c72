"""The share port on a shared directory (NFSv4, GFS2, a local disk): POSIX locks, exclusive create.

Epochs are claimed by exclusive create of ``epochs/N``, atomic on local
filesystems, GFS2 and NFSv4, so two nodes can never hold the same epoch, even
when both believe they hold the lock. Epochs are claimed in order without gaps,
so a master of epoch N is current exactly while the single name ``epochs/N+1``
does not exist: one lookup, which NFSv4 mounted with ``lookupcache=none`` always
sends to the server (a directory listing might be answered from cache, so
listings are only ever a hint).
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from pathlib import Path

from primacy.share import safe_io
from primacy.share.layout import NODE_ENTRY_SUFFIX, ShareLayout
from primacy.share.port import Capabilities, ChangeWatch
from primacy.share.posix_lock import LockMethod, ShareLock, read_holder_from_outside
from primacy.share.records import (
    MAX_EPOCH,
    MAX_RECORD_BYTES,
    EpochRecord,
    HolderInfo,
    NodeEntry,
    PauseMarker,
    Switchover,
    parse_epoch_name,
)
from primacy.share.watch import ShareWatcher

CAPABILITIES = Capabilities(coordination="share", has_session=False, replaces_lock=True)
# The node id of an epoch record ``primacy epochs raise`` wrote (``raise_counter``).
RAISED_BY = "primacy-epochs-raise"


class PosixShare:
    """One node's handle on a shared directory (see ``share/port.py`` for the contract).

    ``reader``: the handle of a process that never takes the lock (a command, the replay): it
    reads the holder record from outside, never through ``ShareLock``, whose first read opens
    (and would create) the lock file. A node's handle must not: a second open and close of the
    lock file in the holding process drops its POSIX lock (DESIGN.md's pitfall)."""

    def __init__(
        self, root: Path | str, method: LockMethod = LockMethod.FLOCK, reader: bool = False
    ) -> None:
        self.layout = ShareLayout(Path(root))
        self.lock = ShareLock(self.layout.lock_file, method)
        self._epochs = self.layout.epochs
        self._epochs_name = str(self._epochs)  # for ``epoch_exists``: no __fspath__ per commit
        self._reader = reader

    # ---- what it is ----------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return CAPABILITIES

    @property
    def session_state(self) -> str | None:
        return None  # no coordination service: the share's own files decide

    def group_exists(self) -> bool:
        return self.layout.root.is_dir()

    # ---- the lock ----------------------------------------------------------

    @property
    def lock_held(self) -> bool:
        return self.lock.held

    def try_lock(self) -> bool:
        return self.lock.try_acquire()

    def check_lock(self) -> None:
        self.lock.revalidate()

    def write_holder(self, holder: HolderInfo) -> None:
        self.lock.write_holder(holder)

    def read_holder(self) -> HolderInfo | None:
        if self._reader:
            return read_holder_from_outside(self.layout.lock_file)
        return self.lock.read_holder()

    def release_lock(self, node_id: str) -> None:
        self.lock.release(node_id)

    def drop_lock(self) -> None:
        self.lock.close()

    def replace_lock(self) -> bool:
        self.lock.replace_file()
        return True

    # ---- epochs ------------------------------------------------------------

    def claim_epoch(self, record: EpochRecord) -> int:
        safe_io.real_directory(self._epochs)
        epoch = max(self.listed_epochs(), default=0) + 1
        while True:
            if epoch > MAX_EPOCH:
                raise OSError(f"no epoch left to claim in {self._epochs} (past {MAX_EPOCH})")
            try:
                # Taken by anything at all: the next number.
                fd = safe_io.create_exclusive(self.layout.epoch_file(epoch))
            except FileExistsError:
                epoch += 1
                continue
            try:
                os.write(fd, record.numbered(epoch).to_bytes())
                os.fsync(fd)
            finally:
                os.close(fd)
            safe_io.fsync_directory(self._epochs)
            return epoch

    def raise_counter(self, to_epoch: int, progress: Callable[[int], None] | None = None) -> int:
        """``primacy epochs raise`` on the share: where no claim reaches ``to_epoch`` (the
        journal's newest served epoch, its records deleted or restored apart from it), record
        it as claimed: a released placeholder, so the next claim takes a later number and no
        takeover waits on it. The highest claim after. Never removes a record, and a number
        it records counts as claimed, which can only fence a master, never keep one current."""
        safe_io.real_directory(self._epochs)
        if max(self.listed_epochs(), default=0) < to_epoch and not self.epoch_exists(to_epoch):
            record = EpochRecord(to_epoch, node_id=RAISED_BY, released=True)
            try:
                fd = safe_io.create_exclusive(self.layout.epoch_file(to_epoch))
            except FileExistsError:
                pass  # a claim or another raise got there first: it counts the same
            else:
                try:
                    os.write(fd, record.to_bytes())
                    os.fsync(fd)
                finally:
                    os.close(fd)
                safe_io.fsync_directory(self._epochs)
                if progress is not None:
                    progress(to_epoch)
        return max(self.listed_epochs(), default=0)

    def epoch_exists(self, epoch: int) -> bool:
        # No path built: this is the lease check, run after every group commit.
        return safe_io.name_exists(self._epochs_name, str(epoch))

    def listed_epochs(self) -> list[int]:
        names = safe_io.names_in(self._epochs)
        return [epoch for name in names if (epoch := parse_epoch_name(name)) is not None]

    def read_epoch(self, epoch: int) -> EpochRecord | None:
        try:
            data = safe_io.read_small_file(self.layout.epoch_file(epoch), MAX_RECORD_BYTES)
        except OSError:
            return None
        return EpochRecord.from_bytes(epoch, data)

    def rewrite_epoch(self, record: EpochRecord) -> None:
        path = self.layout.epoch_file(record.epoch)
        if not safe_io.exists_in(path):  # the epoch must already be ours: never create it here
            raise FileNotFoundError(
                errno.ENOENT, f"epoch {record.epoch} was never claimed", str(path)
            )
        temporary = self._epochs / f".{record.epoch}.{os.getpid()}.tmp"  # not a digit name
        fd = safe_io.create_new_file(temporary)  # a planted symlink is removed, never followed
        try:
            os.write(fd, record.to_bytes())
            os.fsync(fd)
        finally:
            os.close(fd)
        safe_io.replace_within(temporary, path)
        safe_io.fsync_directory(self._epochs)

    # ---- the registry and the group's markers ------------------------------

    def publish_node(self, entry: NodeEntry) -> None:
        safe_io.real_directory(self.layout.nodes)
        # Rewritten every refresh: losing one to a crash is harmless, so no fsync.
        safe_io.write_json_atomically(
            self.layout.node_entry(entry.node_id), entry.to_json(), durable=False
        )

    def forget_node(self, node_id: str) -> None:
        if "/" in node_id or "\0" in node_id or node_id in ("", ".", ".."):
            raise ValueError(f"{node_id!r} cannot name a registry entry")
        safe_io.remove(self.layout.node_entry(node_id))

    def node_entries(self) -> list[NodeEntry]:
        found = []
        for name in sorted(safe_io.names_in(self.layout.nodes)):  # never through a symlink
            if name.startswith(".") or not name.endswith(NODE_ENTRY_SUFFIX):
                continue
            try:
                entry = NodeEntry.from_json(safe_io.read_json(self.layout.nodes / name))
            except (OSError, ValueError):
                continue
            if entry is not None:
                found.append(entry)
        return found

    def pause(self, marker: PauseMarker) -> None:
        safe_io.write_json_atomically(
            self.layout.paused_marker, marker.to_json(), durable=True, share_root=True
        )

    def resume(self) -> None:
        safe_io.remove(self.layout.paused_marker, share_root=True)

    def is_paused(self) -> bool:
        return self.layout.paused_marker.exists()

    def request_switchover(self, switchover: Switchover) -> None:
        safe_io.write_json_atomically(
            self.layout.switchover_marker, switchover.to_json(), durable=True, share_root=True
        )

    def read_switchover(self) -> Switchover | None:
        try:
            raw = safe_io.read_json(self.layout.switchover_marker, share_root=True)
        except (OSError, ValueError):
            return None  # absent, or damaged: a damaged marker holds nobody back
        return Switchover.from_json(raw, time.time())

    def clear_switchover(self) -> None:
        safe_io.remove(self.layout.switchover_marker, share_root=True)

    def close(self) -> None:
        """Nothing to end: every operation opens and closes what it uses."""

    # ---- hints -------------------------------------------------------------

    def watch(
        self,
        own_node_id: str,
        on_master_left: Callable[[], None],
        on_pause_changed: Callable[[], None],
    ) -> ChangeWatch:
        return ShareWatcher(self.layout, own_node_id, on_master_left, on_pause_changed)
