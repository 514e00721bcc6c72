"""The share port in memory: one ``MemoryShare`` per share, one handle per node, no filesystem.

For tests of what the node decides (roles, takeover waits, the HTTP surface)
without real files: the same contract as the POSIX share (``share/port.py``),
checked by the same tests. Faults a test needs on demand are methods of the
share: ``steal_lock`` (the lock lost behind its holder's back, as an expired
NFS lease or a deleted lock file loses it) and ``failing`` (every operation
raises ``OSError``, as a hung or unmounted share does).
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from primacy.share.port import Capabilities, LockLost
from primacy.share.records import (
    HOLDING_ROLES,
    MAX_EPOCH,
    EpochRecord,
    HolderInfo,
    NodeEntry,
    PauseMarker,
    Switchover,
)

CAPABILITIES = Capabilities(coordination="memory", has_session=False, replaces_lock=True)


@dataclass
class _Watch:
    own_node_id: str
    on_master_left: Callable[[], None]
    on_pause_changed: Callable[[], None]
    running: bool = False

    def start(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False


@dataclass
class MemoryShare:
    """The state of one share, shared by every handle (node) on it."""

    epochs: dict[int, EpochRecord | None] = field(default_factory=dict)
    nodes: dict[str, NodeEntry] = field(default_factory=dict)
    holder: HolderInfo | None = None
    paused: PauseMarker | None = None
    switchover: Switchover | None = None
    _owner: MemoryShareHandle | None = None
    _failing: bool = False
    _watches: list[_Watch] = field(default_factory=list)
    _mutex: threading.RLock = field(default_factory=threading.RLock)

    def handle(self) -> MemoryShareHandle:
        """A new node's handle on this share."""
        return MemoryShareHandle(self)

    def steal_lock(self) -> None:
        """The lock is lost behind its holder's back: free for others, the holder not told."""
        with self._mutex:
            self._owner = None
        self._master_left()

    @contextlib.contextmanager
    def failing(self) -> Iterator[None]:
        """Every operation raises OSError while this lasts (a hung or unmounted share)."""
        self._failing = True
        try:
            yield
        finally:
            self._failing = False

    def check(self) -> None:
        if self._failing:
            raise OSError(errno.EIO, "the in-memory share is failing")

    def _master_left(self) -> None:
        for watch in list(self._watches):
            if watch.running:
                watch.on_master_left()

    def _pause_changed(self) -> None:
        for watch in list(self._watches):
            if watch.running:
                watch.on_pause_changed()


class MemoryShareHandle:
    """One node's handle on a ``MemoryShare`` (see ``share/port.py`` for the contract)."""

    def __init__(self, share: MemoryShare) -> None:
        self.share = share
        self._held = False

    # ---- what it is ----------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return CAPABILITIES

    @property
    def session_state(self) -> str | None:
        return None

    def group_exists(self) -> bool:
        return True  # the share lives as long as the test that made it

    # ---- the lock ----------------------------------------------------------

    @property
    def lock_held(self) -> bool:
        return self._held

    def try_lock(self) -> bool:
        share = self.share
        with share._mutex:
            share.check()
            if share._owner is None:
                share._owner = self
            self._held = share._owner is self
            return self._held

    def check_lock(self) -> None:
        with self.share._mutex:
            if not self._held:
                raise LockLost("the lock is not held")
            try:
                self.share.check()
            except OSError as exc:
                raise LockLost(f"re-asserting the lock failed: {exc}") from exc
            if self.share._owner is not self:
                raise LockLost("re-asserting the lock was refused: another holder has it")

    def write_holder(self, holder: HolderInfo) -> None:
        with self.share._mutex:
            self.share.check()
            if not self._held:
                raise LockLost("the lock file is not open")
            self.share.holder = holder

    def read_holder(self) -> HolderInfo | None:
        with self.share._mutex:
            self.share.check()
            return self.share.holder

    def release_lock(self, node_id: str) -> None:
        try:
            with self.share._mutex:
                if self._held and self.share._owner is self:
                    self.share.check()
                    epoch = self.share.holder.epoch if self.share.holder else None
                    self.share.holder = HolderInfo.for_this_process(node_id, epoch, released=True)
        finally:
            self.drop_lock()

    def drop_lock(self) -> None:
        with self.share._mutex:
            was_owner = self.share._owner is self
            if was_owner:
                self.share._owner = None
            self._held = False
        if was_owner:
            self.share._master_left()

    def replace_lock(self) -> bool:
        """As a fresh lock file renamed over the old one: no owner, no holder record."""
        with self.share._mutex:
            self.share.check()
            self.share._owner = None
            self.share.holder = None
            self._held = False
        return True

    # ---- epochs ------------------------------------------------------------

    def claim_epoch(self, record: EpochRecord) -> int:
        with self.share._mutex:
            self.share.check()
            epoch = max(self.share.epochs, default=0) + 1
            if epoch > MAX_EPOCH:
                raise OSError(f"no epoch left to claim (past {MAX_EPOCH})")
            self.share.epochs[epoch] = record.numbered(epoch)
            return epoch

    def epoch_exists(self, epoch: int) -> bool:
        with self.share._mutex:
            self.share.check()
            return epoch in self.share.epochs

    def listed_epochs(self) -> list[int]:
        with self.share._mutex:
            self.share.check()
            return list(self.share.epochs)

    def read_epoch(self, epoch: int) -> EpochRecord | None:
        with self.share._mutex:
            if self.share._failing:
                return None  # as an unreadable record reads on a real share
            return self.share.epochs.get(epoch)

    def rewrite_epoch(self, record: EpochRecord) -> None:
        with self.share._mutex:
            self.share.check()
            if record.epoch not in self.share.epochs:
                raise FileNotFoundError(errno.ENOENT, f"epoch {record.epoch} was never claimed")
            self.share.epochs[record.epoch] = record

    # ---- the registry and the group's markers ------------------------------

    def publish_node(self, entry: NodeEntry) -> None:
        with self.share._mutex:
            self.share.check()
            previous = self.share.nodes.get(entry.node_id)
            self.share.nodes[entry.node_id] = entry
        if (
            previous is not None
            and previous.role in HOLDING_ROLES
            and entry.role not in HOLDING_ROLES
        ):
            self.share._master_left()

    def forget_node(self, node_id: str) -> None:
        if "/" in node_id or "\0" in node_id or node_id in ("", ".", ".."):
            raise ValueError(f"{node_id!r} cannot name a registry entry")
        with self.share._mutex:
            self.share.check()
            self.share.nodes.pop(node_id, None)

    def node_entries(self) -> list[NodeEntry]:
        with self.share._mutex:
            self.share.check()
            return [self.share.nodes[name] for name in sorted(self.share.nodes)]

    def pause(self, marker: PauseMarker) -> None:
        with self.share._mutex:
            self.share.check()
            self.share.paused = marker
        self.share._pause_changed()

    def resume(self) -> None:
        with self.share._mutex:
            self.share.check()
            self.share.paused = None
        self.share._pause_changed()

    def is_paused(self) -> bool:
        with self.share._mutex:
            self.share.check()
            return self.share.paused is not None

    def request_switchover(self, switchover: Switchover) -> None:
        with self.share._mutex:
            self.share.check()
            self.share.switchover = switchover

    def read_switchover(self) -> Switchover | None:
        with self.share._mutex:
            if self.share._failing or self.share.switchover is None:
                return None
            # The same bound as a marker read from a file.
            return Switchover.from_json(self.share.switchover.to_json(), time.time())

    def clear_switchover(self) -> None:
        with self.share._mutex:
            self.share.check()
            self.share.switchover = None

    def close(self) -> None:
        """Nothing to end: the share lives in this process."""

    # ---- hints -------------------------------------------------------------

    def watch(
        self,
        own_node_id: str,
        on_master_left: Callable[[], None],
        on_pause_changed: Callable[[], None],
    ) -> _Watch:
        watch = _Watch(own_node_id, on_master_left, on_pause_changed)
        self.share._watches.append(watch)
        return watch
