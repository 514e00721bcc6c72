"""The master's lease: the lock on the share plus the epoch claimed under it.

``Lease.revalidate`` is the one check everything relies on: the supervisor's
keepalive calls it, and the journal calls it as its fencing check after every
group commit. It passes only if the lock file is still the one we hold, the
lock re-asserts on the held descriptor, and no later epoch exists.

The journal calls it from its writer thread, so every method holds one
mutex: the descriptor is never checked on one thread while another closes it.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from primacy.locker import claimant
from primacy.locker.epoch import EpochRegistry
from primacy.locker.lockfile import HolderInfo, LockLost, LockMethod, ShareLock

# The epoch-record term saying its master outlasted every earlier claim (so it may serve).
OUTLASTED_TERM = "outlasted"
# The epoch-record term saying its master had stopped claiming the role when it let go.
RELEASED_TERM = "released"
# The epoch-record term naming its master as a process of its kernel (locker/claimant.py).
PROCESS_TERM = "process"
# The epoch-record term saying whether its master supervises an exec child, whose death
# its claim bounds (its guardian's deadline), not its supervisor's.
EXEC_CHILD_TERM = "exec_child"


class LeaseLost(Exception):
    """The lease is gone or could not be confirmed; the holder must stop serving at once."""


class Lease:
    """Acquire, revalidate and release mastership of one share."""

    def __init__(self, share: Path, node_id: str, method: LockMethod = LockMethod.FLOCK) -> None:
        self.share = Path(share)
        self.node_id = node_id
        self.lock = ShareLock(self.share, method)
        self.epochs = EpochRegistry(self.share)
        self._epoch: int | None = None
        self._mutex = threading.RLock()
        self._record: dict[str, Any] = {}

    @property
    def epoch(self) -> int | None:
        """The epoch claimed under the current lock, None before a claim."""
        return self._epoch

    @property
    def held(self) -> bool:
        return self.lock.held

    def try_acquire(self) -> bool:
        """One non-blocking attempt at the lock. The epoch is claimed separately."""
        with self._mutex:
            return self.lock.try_acquire()

    def claim_epoch(self, terms: dict[str, Any] | None = None) -> int:
        """Claim epoch N+1 (before reading anything else) and record it in the lock file.

        ``terms`` go into the epoch's record for the next master to read, such
        as the keepalive period this master's claims last.
        """
        with self._mutex:
            if not self.lock.held:
                raise LeaseLost("cannot claim an epoch without holding the lock")
            holder = {
                "node_id": self.node_id,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "claimed_unix_s": time.time(),
                PROCESS_TERM: claimant.this_process(),
                OUTLASTED_TERM: False,  # until ``mark_outlasted``
                **(terms or {}),
            }
            self._epoch = self.epochs.claim_next(holder)
            self._record = holder
            self.lock.write_holder(HolderInfo.for_this_process(self.node_id, self._epoch))
            return self._epoch

    def revalidate(self) -> None:
        """Raise LeaseLost unless we still hold the lock and our epoch is still current."""
        with self._mutex:
            try:
                self.lock.revalidate()
            except LockLost as exc:
                raise LeaseLost(str(exc)) from exc
            if self._epoch is None:
                raise LeaseLost("no epoch has been claimed under this lock")
            try:
                current = self.epochs.is_current(self._epoch)
            except OSError as exc:
                raise LeaseLost(f"cannot look up the next epoch: {exc}") from exc
            if not current:
                raise LeaseLost(f"epoch {self._epoch + 1} was claimed by another node")

    def update_terms(self, terms: dict[str, Any]) -> None:
        """Rewrite our epoch's record with new terms, then confirm the lease still holds.

        Raising a term (a longer keepalive) is safe to act on only after this
        returns: a node that claims the next epoch afterwards reads the new value.
        """
        with self._mutex:
            if self._epoch is None:
                raise LeaseLost("no epoch has been claimed under this lock")
            self._record = {**self._record, **terms}
            try:
                self.epochs.rewrite(self._epoch, self._record)
            except OSError as exc:
                raise LeaseLost(f"cannot rewrite the epoch record: {exc}") from exc
            self.revalidate()

    def terms_to_outlast(self) -> list[dict[str, Any]]:
        """The records of the earlier epochs whose masters may still claim the role.

        Walks back from the epoch before ours to the newest one whose master
        outlasted its own predecessors (``OUTLASTED_TERM`` true): that master may
        have served, and the ones after it never did, but each may have been
        waiting on the claims before it, so all of them are returned. A record
        without the term (written before it existed) counts as outlasted; a
        missing or unreadable one is a claimant that died before its record was
        written, which never served.
        """
        with self._mutex:
            if self._epoch is None:
                return []
            found = []
            for epoch in self.epochs.claimed_before(self._epoch):
                record = self.epochs.read(epoch)
                if record is None:
                    continue
                found.append(record)
                if record.get(OUTLASTED_TERM, True):
                    break
            return found

    def mark_outlasted(self) -> None:
        """Record that this epoch's master has outlasted every earlier claim (before serving).

        Until then the next claimant also waits for the claims this one was
        waiting for, so a master stopped during its takeover wait passes its
        debt on instead of letting the next one serve early.
        """
        self.update_terms({OUTLASTED_TERM: True})

    def holder(self) -> HolderInfo | None:
        """The lock file's holder record, read through our own descriptor."""
        with self._mutex:
            try:
                return self.lock.read_holder()
            except OSError:
                return None

    def release(self) -> None:
        """Give the lock up at once so a slave can take over without waiting.

        Call only once this node has stopped claiming the role: the epoch's
        record is marked ``released`` first, which tells the next master that
        no claim of this epoch is left to outlast. The lock file is marked
        released only while the lease is still valid: after a loss the file may
        already carry a newer holder's record.
        """
        with self._mutex:
            try:
                self.revalidate()
            except LeaseLost:
                self.abandon()
                return
            assert self._epoch is not None  # revalidate passed
            try:
                self._record = {**self._record, RELEASED_TERM: True}
                self.epochs.rewrite(self._epoch, self._record)
            except OSError:
                pass  # the record stays unreleased: the next master just waits
            self._epoch = None
            self.lock.release(self.node_id)

    @staticmethod
    def handed_over(records: list[dict[str, Any]]) -> bool:
        """Whether no master of ``terms_to_outlast``'s records can still claim the role.

        Only the oldest of them (the newest epoch whose master outlasted its
        predecessors) can have served; the ones after it never did. If that
        master released the lock after it stopped claiming, there is nothing to wait for.
        """
        return bool(records) and all(
            records[-1].get(term) is True for term in (OUTLASTED_TERM, RELEASED_TERM)
        )

    @staticmethod
    def claimant_has_ended(records: list[dict[str, Any]]) -> bool:
        """Whether the master of ``terms_to_outlast``'s records that may have served is a
        process of this kernel that can run no code of its own any more, and had no exec
        child: a dead process answers no ``/master`` and serves no client, so there is no
        claim to outlast (docs/safety.md). A child's tree dies by its guardian's deadline,
        the claim's, so a master with one is always waited out."""
        return (
            bool(records)
            and records[-1].get(EXEC_CHILD_TERM) is False
            and claimant.has_ended(records[-1].get(PROCESS_TERM))
        )

    def abandon(self) -> None:
        """Drop the descriptor without touching the file (the lease is already lost)."""
        with self._mutex:
            self._epoch = None
            self.lock.close()
