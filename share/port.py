"""The port: everything a node asks of the share, in one interface (after Patroni's DCS layer).

``share/posix.py`` implements it on a shared directory (NFSv4, GFS2, a local
disk); ``share/memory.py`` in memory, for tests of the node's logic that need no
filesystem. A lease on a coordination service (ZooKeeper, say) is a third
implementation of the same methods (``share/zookeeper.py``): the lease policy in
``locker/`` and the node above it do not change (docs/architecture.md, "The share layer").
Implementations are built in one place, ``share/factory.py``. What a slave's journal
follower reads (a revalidating open of a segment another node appends, with the file's
identity) is the port's part in ``share/followed_files.py``, on real files and in memory.

The port says what it can do. ``ShareObserver`` is its read-only part: the group's epoch
claims (who became master when: the role history every backend keeps), the holder record,
the registry and the markers, and the session state of a backend that has one. It is
all a reader (``primacy status``, ``cluster``, the replay) needs, on any backend.
``capabilities`` says what differs between backends.

The contract every implementation keeps (``tests/share/test_port_contract.py``
runs the same tests against each):

- the lock is exclusive across every handle of one share, and a handle's loss
  of it (a lock file deleted or replaced, an expired NFS lease) is seen by its
  next ``check_lock``;
- ``replace_lock`` (where offered) takes the lock from its holder: the holder's
  next ``check_lock`` raises ``LockLost``, and the lock can be taken again;
- ``claim_epoch`` is atomic: two handles never get the same number, even when
  both believe they hold the lock; epochs are claimed without gaps;
- ``epoch_exists`` answers from the authority itself (on NFS, a single-name
  lookup the client must send to the server), never from a cache: the lease
  check's safety rests on it; ``latest_epoch_hint`` may be stale;
- the holder record, the registry and the markers read back what any handle wrote
  before the read began (ZooKeeper, whose plain reads may come from a follower behind
  the leader, syncs first);
- records read back are typed (``share/records.py``) and hostile content yields
  ``None``, never an exception; I/O failures raise ``OSError``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from primacy.share.records import EpochRecord, HolderInfo, NodeEntry, PauseMarker, Switchover


class LockLost(Exception):
    """The lock is no longer ours, or could not be checked (which counts as lost)."""


class EpochCounterWentBack(OSError):
    """A coordinator's epoch counter, confirmed by its authority, is below a value this handle
    confirmed before: epochs only grow, so it was reset (a stranger, a restored backup).
    Every answer it gives is suspect; the lease check fails and no claim is made."""

    def __init__(self, seen: int, now: int) -> None:
        self.seen = seen
        self.now = now
        super().__init__(
            f"the epoch counter went back from {seen} to {now}: reset or restored; "
            "its answers cannot be trusted"
        )


@dataclass(frozen=True)
class Capabilities:
    """What a port's backend offers beyond the common contract, said rather than probed."""

    coordination: str  # who decides the master: "share" (its files), "zookeeper", "memory"
    has_session: bool  # ``session_state`` reports a coordination service's session
    replaces_lock: bool  # ``replace_lock`` can free a stalled holder's lock


class ChangeWatch(Protocol):
    """Hints that the share changed (a master let go, the pause marker moved): never decisions."""

    def start(self) -> None:
        """Begin watching; OSError if this share cannot raise events (slaves then poll)."""

    def stop(self) -> None: ...


class ShareObserver(Protocol):
    """What may be read of a group without taking part in it: nothing here changes anything,
    takes the lock or disturbs its holder. A reader's handle (``share/factory.py``,
    ``reading``) creates nothing either."""

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def session_state(self) -> str | None:
        """The coordination service's session (connecting, connected, suspended, lost, closed);
        None for a backend without one."""

    def group_exists(self) -> bool:
        """Whether a group has used this share or path (a reader refuses one that has not)."""

    def read_holder(self) -> HolderInfo | None:
        """The lock's holder record (None if none or unreadable), read without disturbing the
        lock: a node's handle through what it holds, a reader's from outside."""

    def epoch_exists(self, epoch: int) -> bool:
        """Whether ``epoch`` has been claimed, asked of the authority. OSError propagates."""

    def listed_epochs(self) -> list[int]:
        """The claimed epochs a listing shows: a hint, which may be stale."""

    def read_epoch(self, epoch: int) -> EpochRecord | None:
        """The record of ``epoch`` (None if absent or unreadable)."""

    def node_entries(self) -> list[NodeEntry]: ...

    def is_paused(self) -> bool: ...

    def read_switchover(self) -> Switchover | None: ...

    def close(self) -> None:
        """End this handle's connections (a coordination service's session with them)."""


class SharePort(ShareObserver, Protocol):
    """One node's handle on the share: the observer's reads, and what a node does."""

    # ---- the lock ----------------------------------------------------------

    @property
    def lock_held(self) -> bool: ...

    def try_lock(self) -> bool:
        """One non-blocking attempt at the lock; True if this handle now holds it."""

    def check_lock(self) -> None:
        """Raise LockLost unless this handle still holds the lock (re-asserted at the source)."""

    def write_holder(self, holder: HolderInfo) -> None:
        """Record the holder with the lock, durably (only while holding it)."""

    def release_lock(self, node_id: str) -> None:
        """Mark the holder record released, then let the lock go (even if marking fails)."""

    def drop_lock(self) -> None:
        """Let the lock go without touching the record (the lease is already lost)."""

    def replace_lock(self) -> bool:
        """Free the lock from a holder that stalled, without its help: on a file share, a fresh
        lock file renamed over the old one (the dead holder's lock stays on the unlinked file
        and binds nobody), so the next ``try_lock`` of any handle can take it and the holder's
        next ``check_lock`` fails. False where the share has no such step (ZooKeeper: a dead
        holder's session expires on its own). Safe for the same reason a lock file deleted
        behind a master's back is: the epoch fences the old holder (docs/safety.md)."""

    # ---- epochs ------------------------------------------------------------

    def claim_epoch(self, record: EpochRecord) -> int:
        """Claim the next free epoch atomically and durably with ``record``; return it."""

    def rewrite_epoch(self, record: EpochRecord) -> None:
        """Replace the record of an epoch already claimed (never create it): readers see the
        old record or the new one, never a part. FileNotFoundError if never claimed."""

    # ---- the registry and the group's markers ------------------------------

    def publish_node(self, entry: NodeEntry) -> None: ...

    def forget_node(self, node_id: str) -> None:
        """Remove ``node_id``'s registry entry (a node stopped for good); nothing if it has
        none. ValueError for a name no entry can have. A node still running writes its
        entry again at its next refresh."""

    def pause(self, marker: PauseMarker) -> None: ...

    def resume(self) -> None: ...

    def request_switchover(self, switchover: Switchover) -> None: ...

    def clear_switchover(self) -> None: ...

    # ---- hints -------------------------------------------------------------

    def watch(
        self,
        own_node_id: str,
        on_master_left: Callable[[], None],
        on_pause_changed: Callable[[], None],
    ) -> ChangeWatch:
        """A watch that calls ``on_master_left`` when the share shows the master went away and
        ``on_pause_changed`` when the pause marker appears or goes. Hints only."""


def latest_epoch_hint(port: ShareObserver) -> int:
    """The highest epoch a listing shows (0 if none)."""
    return max(port.listed_epochs(), default=0)


def latest_epoch(port: ShareObserver) -> int:
    """The highest claimed epoch, confirmed by single-name lookups past the hint."""
    epoch = latest_epoch_hint(port)
    while port.epoch_exists(epoch + 1):
        epoch += 1
    return epoch


def epochs_claimed_before(port: ShareObserver, epoch: int) -> Iterator[int]:
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
        if port.epoch_exists(candidate):
            yield candidate
            candidate -= 1
            continue
        if listed is None:
            listed = sorted(port.listed_epochs(), reverse=True)
        candidate = next((e for e in listed if e < candidate), 0)


def epoch_claims(port: ShareObserver) -> dict[int, EpochRecord | None]:
    """Every epoch a listing shows, oldest first, with its record (None where unreadable: the
    claim is still proof the epoch was claimed). The group's role history: who became master
    when, on any backend."""
    return {epoch: port.read_epoch(epoch) for epoch in sorted(set(port.listed_epochs()))}
