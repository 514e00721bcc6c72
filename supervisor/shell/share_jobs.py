"""The role loop's work on the share: lock, epochs, journal. Each job runs on the lock I/O worker.

A job takes everything it needs as arguments (captured on the role loop) and
returns one event saying what happened; it never writes the node's state.
The ``Lease`` belongs to this object, so to the worker thread (the journal's
writer also calls ``Lease.revalidate`` as its fencing check; the lease's own
mutex covers that). Every failure, expected or not, becomes an event the loop
acts on (``LockIoWorker`` turns an unexpected exception into the job's failure
event), so a share that answers with garbage never leaves a node holding the
lock idle.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from primacy.locker.lease import CoordinatorBehindShare, Lease, LeaseLost
from primacy.locker.stall import StallWatch, sighting
from primacy.share.access import Identity, share_fix, unusable_paths
from primacy.share.layout import ShareLayout
from primacy.share.port import EpochCounterWentBack, SharePort
from primacy.share.records import HolderInfo, Role, RoleChange
from primacy.store.errors import JournalError, JournalFenced
from primacy.store.follower import JournalFollower
from primacy.store.journal import JournalStore
from primacy.store.segments import highest_served_epoch
from primacy.store.unclaimed import newest_written_epoch
from primacy.supervisor import codes
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.machine import roles

log = logging.getLogger("primacy.node")

Clock = Callable[[], float]
CommitObserver = Callable[[int, int, float], None]


class ShareJobs:
    """The lock and journal operations of one node, each returning the event for the role loop."""

    def __init__(
        self,
        config: NodeConfig,
        port: SharePort,
        clock: Clock,
        observe_commit: CommitObserver | None = None,
        follower: JournalFollower | None = None,
    ) -> None:
        self.node_id = config.node_id
        self.port = port
        # The journal's own evidence is the floor under the claims: a coordinator may be reset
        # or lie, and the share's epochs/ be deleted or restored apart from the journal
        # (docs/safety.md, "The epoch floor" and "A segment of an epoch nobody claimed").
        self._coordinator_is_the_share = config.coordination == "share"
        journal_dir = config.store_config().journal_dir
        self.lease = Lease(port, config.node_id, lambda: self._epoch_floor(journal_dir))
        self._clock = clock
        self._stall = (
            StallWatch(config.stall_takeover_ms / 1000, clock) if config.stall_takeover_ms else None
        )
        self._observe_commit = observe_commit
        self._follower = follower  # this slave's followed journal state, handed over at opening
        self._layout = ShareLayout(config.share)
        # Why the last claim was refused for a path this node cannot use; while set, every
        # lock attempt checks the share again first (on this worker, like the claims).
        self._share_unusable: str | None = None
        # A path opening the journal was refused though its owner and mode looked right (an
        # ACL, a server's squashing): tried again with the checks until it opens.
        self._refused_path: str | None = None

    def job_for(
        self,
        action: roles.Action,
        config: NodeConfig,
        keep_alive_ms: int,
        store: JournalStore | None,
        started_at: float,
    ) -> tuple[Callable[[], object], Callable[[BaseException], object]]:
        """The job carrying out a lock, epoch, journal or lease action (the role loop's
        ``started_at`` is when a lease check began), and the event if it raises."""
        match action:
            case roles.TryLock():
                return self.try_lock, self.lock_attempt_failed
            case roles.YieldLock():
                return self.yield_lock, lambda exc: None
            case roles.ClaimEpoch():
                return lambda: self.claim_epoch(keep_alive_ms, bool(config.exec)), lease_lost(
                    "claiming an epoch"
                )
            case roles.OpenJournal(epoch=epoch):
                return lambda: self.open_journal(config, epoch), lambda exc: roles.JournalFailed(
                    f"opening the journal failed: {exc!r}"
                )
            case roles.Revalidate(promotion=True):
                return lambda: self.journal_tenure(store, started_at), lease_lost("the lease check")
            case roles.Revalidate():
                return lambda: self.revalidate(started_at), lease_lost("the lease check")
        raise ValueError(f"{action!r} is no share job")

    # ---- slave -------------------------------------------------------------

    def try_lock(self) -> roles.LockResult:
        if self._share_unusable is not None:
            self._share_unusable = self.share_unusable()
            if self._share_unusable is not None:  # no lock taken: a claim would be refused
                return roles.LockResult(
                    False,
                    self._holder(),
                    error=self._share_unusable,
                    share_unusable=self._share_unusable,
                )
            log.info(
                "%s node %s can use the share again: it takes part in claims",
                codes.SHARE_UNUSABLE_BY_NODE,
                self.node_id,
            )
        try:
            acquired = self.lease.try_acquire()
            if not acquired and self._holder_stalled():
                acquired = self.lease.try_acquire()
            acquired = acquired and not self._switchover_holds_us_back()
        except OSError as exc:
            log.warning(
                "%s node %s cannot try the lock: %s", codes.LOCK_ATTEMPT_FAILED, self.node_id, exc
            )
            return roles.LockResult(False, self._holder(), error=str(exc))
        return roles.LockResult(acquired, self._holder())

    def lock_attempt_failed(self, error: BaseException) -> roles.LockResult:
        """The failure event of a ``try_lock`` that raised (garbage on the share, say).

        The attempt may have taken the lock before it failed: drop it, so a node
        never holds a lock its role loop does not know about (the group would
        have no master).
        """
        self.lease.abandon()
        return roles.LockResult(False, None, error=f"the lock attempt failed: {error!r}")

    def _holder_stalled(self) -> bool:
        """After a refused attempt: if the holder's registry entry has not changed for
        ``stall_takeover_ms``, replace the lock file so the next attempt can take it
        (``locker/stall.py`` says why that is safe and when it is right)."""
        if self._stall is None:
            return False
        holder = self._holder()
        seen = sighting(holder, self.port.node_entries())
        if not self._stall.stalled(seen) or holder is None:
            return False
        unchanged_s = self._stall.unchanged_for_s()
        if not self.port.replace_lock():
            self._stall = None  # this share has no such step: never ask again
            return False
        self._stall.reset()
        log.warning(
            "%s node %s replaced the lock file: its holder %s (epoch %s) has not refreshed its "
            "registry entry for %.1f s",
            codes.STALLED_LOCK_REPLACED,
            self.node_id,
            holder.node_id,
            holder.epoch,
            unchanged_s,
        )
        return True

    def _switchover_holds_us_back(self) -> bool:
        """After taking the lock: if a switchover names another node, give the lock back.

        Read after acquiring, not before: the old master writes the request
        before it releases, so whoever gets the lock after the release sees it.
        """
        request = self.port.read_switchover()
        if request is None or not request.holds_back(
            self.node_id, self.lease.latest_epoch(), time.time()
        ):
            return False
        self.lease.abandon()
        return True

    def yield_lock(self) -> None:
        self.lease.abandon()

    # ---- taking over -------------------------------------------------------

    def _epoch_floor(self, journal_dir: Path) -> int:
        """The epoch the share's journal proves was claimed; the lease refuses a claim while
        the coordinator has no claim of it (docs/safety.md, "A hole in step 1"). Every served
        segment needed a claim: with no claim at all, a segment's intact header is proof;
        beside claims, a later epoch's header alone may be planted (the unclaimed-segment
        rule's to set aside), a batch of its epoch after it is not."""
        if not self._coordinator_is_the_share:
            return highest_served_epoch(journal_dir)
        listed = self.port.listed_epochs()
        if not listed:
            return highest_served_epoch(journal_dir)
        written = newest_written_epoch(journal_dir)
        return written if written > max(listed) else 0  # the lease asks epochs/<written> itself

    def claim_epoch(
        self, keep_alive_period_ms: int, exec_child: bool = False
    ) -> roles.EpochClaimed | roles.LeaseLost | roles.ClaimFailed:
        # No epoch for a node that could not open the journal under it: each would be burnt.
        self._share_unusable = self.share_unusable()
        if self._share_unusable is not None:
            log.error("%s; it claims no epoch until then", self._share_unusable)
            return roles.ClaimFailed(self._share_unusable, share_unusable=self._share_unusable)
        try:
            epoch = self.lease.claim_epoch(keep_alive_period_ms, exec_child)
            # Every earlier master that may still claim the role: the previous one, and
            # before it any whose successor stopped during its takeover wait.
            earlier = self.lease.terms_to_outlast()
        except LeaseLost as exc:
            return roles.LeaseLost(f"claiming an epoch failed: {exc}")
        except (CoordinatorBehindShare, EpochCounterWentBack) as exc:
            floor = exc.floor if isinstance(exc, CoordinatorBehindShare) else exc.seen
            why = codes.EPOCHS_LOST if self._coordinator_is_the_share else codes.COUNTER_BEHIND
            log.error(
                "%s node %s refuses to claim an epoch: %s",
                codes.COORDINATOR_BEHIND_SHARE,
                self.node_id,
                why.format(reason=exc, floor=floor),
            )
            return roles.ClaimFailed(str(exc), behind_share_floor=floor)
        except OSError as exc:  # the lock is still ours; the share would not take the record
            return roles.ClaimFailed(f"claiming an epoch failed: {exc}")
        periods = [
            record.lock_keep_alive_period_ms
            for record in earlier
            if record.lock_keep_alive_period_ms is not None
        ]
        if self.lease.handed_over(earlier):
            why = "; the previous master handed over: no takeover wait"
        elif self.lease.claimant_has_ended(earlier):
            why = "; the previous master's process has ended: no takeover wait"
        else:
            why = ""
        # Not a reason to skip the wait: why a node on the old master's kernel still waits.
        hidden = (
            "; the previous master's process is hidden from this node (/proc hidepid or "
            "ProtectProc=invisible): its claim is waited out"
            if not why and self.lease.claimant_is_hidden(earlier)
            else ""
        )
        log.info(
            "%s node %s claimed epoch %d%s%s",
            codes.EPOCH_CLAIMED,
            self.node_id,
            epoch,
            why,
            hidden,
        )
        self.port.clear_switchover()
        return roles.EpochClaimed(
            epoch,
            max(periods) / 1000 if periods else None,
            nothing_to_outlast=bool(why),
            holder=self._holder(),
        )

    def open_journal(
        self, config: NodeConfig, epoch: int
    ) -> roles.JournalOpened | roles.JournalFailed:
        try:
            store = JournalStore.open(
                config.store_config(),
                epoch=epoch,
                fencing_check=self.lease.revalidate,
                # A later segment is set aside as planted only on the share's own word (no
                # epochs/E beside it); a coordinator's "E was never claimed" may be a counter
                # that went backwards, so there such a segment stops the opening instead.
                epoch_claimed=self.port.epoch_exists if self._coordinator_is_the_share else None,
                follower=self._follower,
            )
        except (JournalError, OSError, ValueError) as exc:
            denied = _permission_error(exc)
            if denied is not None and denied.filename:
                # One epoch went to this; the next lock attempt checks again and claims none.
                self._refused_path = str(denied.filename)
                self._share_unusable = f"opening the journal was refused: {denied}"
            return roles.JournalFailed(str(exc))
        store.commit_observer = self._observe_commit
        return roles.JournalOpened(store)

    def journal_tenure(
        self, store: JournalStore | None, started_at: float
    ) -> roles.RevalidationPassed | roles.LeaseLost | roles.JournalFailed:
        """The promotion's lease check, as the commit of the tenure record.

        The record is written, synced, then fencing-checked by a lease check that
        starts after the write: passing it is the fresh check promotion needs, and
        every master a client or load balancer ever saw has its tenure in the journal.
        """
        if store is None:
            return roles.JournalFailed("the journal is not open")
        try:
            self.lease.mark_outlasted()  # the takeover wait is over; before serving
        except LeaseLost as exc:
            return roles.LeaseLost(f"recording the end of the takeover wait failed: {exc}")
        event = RoleChange(self.node_id, Role.ACQUIRED, Role.MASTER, store.epoch, "serving")
        try:
            store.append_control(event.to_json()).result()
        except JournalFenced as exc:
            return roles.LeaseLost(f"the fencing check of the tenure record failed: {exc}")
        except JournalError as exc:
            return roles.JournalFailed(f"the tenure record was not journaled: {exc}")
        return self._confirmed(started_at)

    # ---- master ------------------------------------------------------------

    def revalidate(self, started_at: float) -> roles.RevalidationPassed | roles.LeaseLost:
        try:
            self.lease.revalidate()
        except LeaseLost as exc:
            return roles.LeaseLost(str(exc))
        return self._confirmed(started_at)

    def record_keep_alive(
        self, timings: roles.Timings, longer: bool
    ) -> roles.TimingsChanged | roles.LeaseLost | None:
        """Keep the epoch record's keepalive no shorter than the one our claims use.

        A longer keepalive may count only once the record says so (a node that
        claims the next epoch afterwards waits for it): then the loop applies it.
        """
        if self.lease.epoch is not None:
            try:
                self.lease.set_keep_alive(round(timings.lock_keep_alive_period_s * 1000))
            except LeaseLost as exc:
                return roles.LeaseLost(str(exc))
        return roles.TimingsChanged(timings) if longer else None

    def release(
        self,
        store: JournalStore | None,
        graceful: bool,
        leaving: roles.RoleChanged | None = None,
    ) -> roles.ServingStopped:
        """Stop journal writes, then let the lock go: nothing is written under a lost lock.
        ``leaving``: the role machine's own change out of master (to ``stopping`` on a stop,
        ``demoting`` on a switchover or another graceful step down), journaled as it said it
        before the journal closes."""
        if store is not None:
            if graceful and leaving is not None:
                change = RoleChange(
                    self.node_id, leaving.old, leaving.new, store.epoch, leaving.reason
                )
                append_role_change(store, change)
            store.close()
        if graceful and self.lease.held:
            try:
                self.lease.release()
                log.info("%s node %s released the lock", codes.LOCK_RELEASED, self.node_id)
            except OSError as exc:
                log.warning(
                    "%s node %s could not mark the lock released (%s); dropping it",
                    codes.RELEASE_UNANSWERED,
                    self.node_id,
                    exc,
                )
                self.lease.abandon()
        else:
            self.lease.abandon()
        return roles.ServingStopped()

    # ---- helpers -----------------------------------------------------------

    def share_unusable(self) -> str | None:
        """Why this node cannot use the share (the paths its user may not use, and the one
        fix), with its code; None if it can."""
        identity = Identity.current()
        found = unusable_paths(
            self._layout, identity, journal_only=not self._coordinator_is_the_share
        )
        if not found:
            return self._still_refused(identity)
        first = found[0]
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        fix = first.fix(identity) if len(found) == 1 else share_fix(self._layout.root, identity)
        return (
            f"{codes.SHARE_UNUSABLE_BY_NODE} node {self.node_id} cannot use the share as user "
            f"{identity.user}: {first.path} ({first.problem(identity.user)}){more}. Fix: {fix} "
            f"(primacy doctor {self._layout.root} lists every path)"
        )

    def _still_refused(self, identity: Identity) -> str | None:
        """After the journal was refused a path the modes allow: whether it still is."""
        if self._refused_path is None:
            return None
        try:
            os.close(os.open(self._refused_path, os.O_RDONLY | os.O_NOFOLLOW))
        except PermissionError as exc:
            return (
                f"{codes.SHARE_UNUSABLE_BY_NODE} node {self.node_id} cannot use the share as user "
                f"{identity.user}: opening {self._refused_path} is refused ({exc.strerror}) "
                "though its owner and mode allow it: check its ACL and the file server's "
                "export (root or all squashing)"
            )
        except OSError:
            pass  # gone or another error: the refusal is over; the next opening says the rest
        self._refused_path = None
        return None

    def _confirmed(self, started_at: float) -> roles.RevalidationPassed:
        return roles.RevalidationPassed(started_at, self._clock() - started_at, time.time())

    def _holder(self) -> HolderInfo | None:
        return self.lease.holder()


def _permission_error(exc: BaseException) -> PermissionError | None:
    """The permission refusal behind ``exc`` (itself, or what it was raised from), if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, PermissionError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def append_role_change(store: JournalStore, change: RoleChange) -> None:
    try:
        store.append_control(change.to_json()).add_done_callback(_log_control_failure)
    except JournalError as exc:
        log.warning(
            "%s node %s could not journal %s -> %s: %s",
            codes.ROLE_CHANGE_NOT_JOURNALED,
            change.node,
            change.from_role,
            change.to_role,
            exc,
        )


def _log_control_failure(future: Future[int]) -> None:
    if future.exception() is not None:
        log.warning(
            "%s a role change was not journaled: %s",
            codes.ROLE_CHANGE_NOT_JOURNALED,
            future.exception(),
        )


def lease_lost(what: str) -> Callable[[BaseException], roles.LeaseLost]:
    """The failure event of a lease job that raised: the lease can no longer be trusted."""
    return lambda exc: roles.LeaseLost(f"{what} failed: {exc!r}")
