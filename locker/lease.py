"""The master's lease: the lock on the share plus the epoch claimed under it (the lease policy).

``Lease.revalidate`` is the one check everything relies on: the supervisor's
keepalive calls it, and the journal calls it as its fencing check after every
group commit. It passes only if the lock is still the one we hold (re-asserted
at its source) and no later epoch exists. The share itself is reached through
its port (``share/port.py``), so this policy is the same on any implementation.

The journal calls it from its writer thread, so every method holds one
mutex: the lock is never checked on one thread while another drops it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from primacy.locker import claimant
from primacy.share.port import LockLost, SharePort, epochs_claimed_before, latest_epoch
from primacy.share.records import EpochRecord, HolderInfo


class LeaseLost(Exception):
    """The lease is gone or could not be confirmed; the holder must stop serving at once."""


class CoordinatorBehindShare(Exception):
    """The coordinator says the latest claim is below an epoch the share shows was served.

    Its counter went backwards (a stranger reset it, a backup was restored, the group's
    path changed): a claim it hands out could repeat a served epoch, and its "not
    claimed" could set a served segment aside. The node claims nothing until it agrees.
    """

    def __init__(self, floor: int) -> None:
        self.floor = floor
        super().__init__(
            f"the coordinator has no claim of epoch {floor}, yet the share's journal holds a "
            f"segment its master wrote: the coordinator's epoch counter is behind the share "
            "(reset, restored from a backup, or a new group path over an old share)"
        )


class Lease:
    """Acquire, revalidate and release mastership of one share."""

    def __init__(
        self, port: SharePort, node_id: str, epoch_floor: Callable[[], int] | None = None
    ) -> None:
        """``epoch_floor``: the highest epoch the share shows was served, read from the share
        itself, for a port whose claims live elsewhere (ZooKeeper): no claim is made while
        the port does not confirm that epoch claimed."""
        self.port = port
        self.node_id = node_id
        self._epoch_floor = epoch_floor
        self._epoch: int | None = None
        self._mutex = threading.RLock()
        self._record: EpochRecord | None = None

    @property
    def epoch(self) -> int | None:
        """The epoch claimed under the current lock, None before a claim."""
        return self._epoch

    @property
    def held(self) -> bool:
        return self.port.lock_held

    def try_acquire(self) -> bool:
        """One non-blocking attempt at the lock. The epoch is claimed separately."""
        with self._mutex:
            return self.port.try_lock()

    def claim_epoch(
        self, lock_keep_alive_period_ms: float | None = None, exec_child: bool = False
    ) -> int:
        """Claim epoch N+1 (before reading anything else) and record it with the lock.

        The record carries the terms the next master reads: how long this master's
        claims last (its keepalive), and whether an exec child's death bounds them.
        """
        with self._mutex:
            if not self.port.lock_held:
                raise LeaseLost("cannot claim an epoch without holding the lock")
            self._check_floor()
            record = EpochRecord.claim(
                self.node_id, claimant.this_process(), lock_keep_alive_period_ms, exec_child
            )
            self._epoch = self.port.claim_epoch(record)
            self._record = record.numbered(self._epoch)
            self.port.write_holder(HolderInfo.for_this_process(self.node_id, self._epoch))
            return self._epoch

    def _check_floor(self) -> None:
        """CoordinatorBehindShare unless the port confirms the share's floor was claimed.

        Asked of the port's authority (on ZooKeeper a quorum check of the counter), so
        the claim that follows, which takes the counter's next number, lands above it.
        """
        if self._epoch_floor is None:
            return
        floor = self._epoch_floor()
        if floor > 0 and not self.port.epoch_exists(floor):
            raise CoordinatorBehindShare(floor)

    def latest_epoch(self) -> int:
        """The highest epoch claimed on the share, confirmed at the source."""
        return latest_epoch(self.port)

    def revalidate(self) -> None:
        """Raise LeaseLost unless we still hold the lock and our epoch is still current."""
        with self._mutex:
            try:
                self.port.check_lock()
            except LockLost as exc:
                raise LeaseLost(str(exc)) from exc
            if self._epoch is None:
                raise LeaseLost("no epoch has been claimed under this lock")
            try:
                superseded = self.port.epoch_exists(self._epoch + 1)
            except OSError as exc:
                raise LeaseLost(f"cannot look up the next epoch: {exc}") from exc
            if superseded:
                raise LeaseLost(f"epoch {self._epoch + 1} was claimed by another node")

    def set_keep_alive(self, lock_keep_alive_period_ms: float) -> None:
        """Rewrite our epoch's record with a new keepalive, then confirm the lease still holds.

        A longer keepalive is safe to act on only after this returns: a node that
        claims the next epoch afterwards reads the new value.
        """
        self._update(lock_keep_alive_period_ms=lock_keep_alive_period_ms)

    def _update(self, **changes: object) -> None:
        with self._mutex:
            if self._epoch is None or self._record is None:
                raise LeaseLost("no epoch has been claimed under this lock")
            self._record = replace(self._record, **changes)  # type: ignore[arg-type]
            try:
                self.port.rewrite_epoch(self._record)
            except OSError as exc:
                raise LeaseLost(f"cannot rewrite the epoch record: {exc}") from exc
            self.revalidate()

    def terms_to_outlast(self) -> list[EpochRecord]:
        """The records of the earlier epochs whose masters may still claim the role.

        Walks back from the epoch before ours to the newest one whose master
        outlasted its own predecessors (``outlasted``): that master may have
        served, and the ones after it never did, but each may have been waiting
        on the claims before it, so all of them are returned. A record written
        before the term existed counts as outlasted; a missing or unreadable one
        is a claimant that died before its record was written, which never served.
        """
        with self._mutex:
            if self._epoch is None:
                return []
            found = []
            for epoch in epochs_claimed_before(self.port, self._epoch):
                record = self.port.read_epoch(epoch)
                if record is None:
                    continue
                found.append(record)
                if record.outlasted:
                    break
            return found

    def mark_outlasted(self) -> None:
        """Record that this epoch's master has outlasted every earlier claim (before serving).

        Until then the next claimant also waits for the claims this one was
        waiting for, so a master stopped during its takeover wait passes its
        debt on instead of letting the next one serve early.
        """
        self._update(outlasted=True)

    def holder(self) -> HolderInfo | None:
        """The lock's holder record (on a POSIX share, read through our own descriptor)."""
        with self._mutex:
            try:
                return self.port.read_holder()
            except OSError:
                return None

    def release(self) -> None:
        """Give the lock up at once so a slave can take over without waiting.

        Call only once this node has stopped claiming the role: the epoch's
        record is marked ``released`` first, which tells the next master that
        no claim of this epoch is left to outlast. The lock's holder record is
        marked released only while the lease is still valid: after a loss it may
        already carry a newer holder's record.
        """
        with self._mutex:
            try:
                self.revalidate()
            except LeaseLost:
                self.abandon()
                return
            assert self._record is not None  # revalidate passed
            try:
                self._record = replace(self._record, released=True)
                self.port.rewrite_epoch(self._record)
            except OSError:
                pass  # the record stays unreleased: the next master just waits
            self._epoch = None
            self.port.release_lock(self.node_id)

    @staticmethod
    def handed_over(records: list[EpochRecord]) -> bool:
        """Whether no master of ``terms_to_outlast``'s records can still claim the role.

        Only the oldest of them (the newest epoch whose master outlasted its
        predecessors) can have served; the ones after it never did. If that
        master released the lock after it stopped claiming, there is nothing to wait for.
        """
        return bool(records) and records[-1].outlasted and records[-1].released

    @staticmethod
    def claimant_has_ended(records: list[EpochRecord]) -> bool:
        """Whether the master of ``terms_to_outlast``'s records that may have served is a
        process of this kernel that can run no code of its own any more, and had no exec
        child: a dead process answers no ``/master`` and serves no client, so there is no
        claim to outlast (docs/safety.md). A child's tree dies by its guardian's deadline,
        the claim's, so a master with one is always waited out."""
        return (
            bool(records)
            and records[-1].exec_child is False
            and claimant.has_ended(records[-1].process)
        )

    @staticmethod
    def claimant_is_hidden(records: list[EpochRecord]) -> bool:
        """Whether that master's process is there (its PID in use on this kernel) but hidden
        from this node by ``/proc`` (``hidepid``, ``ProtectProc=invisible``): no proof of its
        end can be had, so the claim is waited out; the operator is told why."""
        return bool(records) and claimant.sighting(records[-1].process) is claimant.Sighting.HIDDEN

    def abandon(self) -> None:
        """Let the lock go without touching the share's records (the lease is already lost)."""
        with self._mutex:
            self._epoch = None
            self._record = None
            self.port.drop_lock()
