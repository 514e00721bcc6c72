"""The role machine's vocabulary: roles, priorities, timings, events in, actions out.

Plain frozen values (``Timings`` also works out the waits they imply);
``supervisor/machine/role_table.py`` holds the states and the table of transitions,
``supervisor/machine/roles.py`` the machine that applies it. The events are also what
the node's threads post: a lock I/O job returns the machine's event itself,
carrying what the shell records besides (the lock holder, a lease check's
duration, the opened journal), so there is one vocabulary, not two.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

# Role is the share's: one spelling for the registry, the journal and /status.
from primacy.share.records import HolderInfo, Role

if TYPE_CHECKING:
    from primacy.store.journal import JournalStore


class Priority(enum.IntEnum):
    """How eager a node is to become master; ``never`` never takes the lock."""

    NEVER = 0
    NORMAL = 1
    HIGH = 2
    HIGHEST = 3

    @classmethod
    def of_entry(cls, text: str) -> Priority:
        """A registry entry's priority: entries are untrusted, and one this node cannot read
        never makes its node a candidate."""
        try:
            return cls[text.upper()]
        except KeyError:
            return cls.NEVER


# A new master outlasts an old claim by its keepalive plus this much for clock-rate drift.
TAKEOVER_DRIFT_MARGIN = 0.10
# An exec child's guardian kills its tree this fraction of a keepalive before the claim ends:
# SIGKILL ends a process's user code on delivery, and the kill gets its own margin inside
# the claim rather than a share of the takeover's drift margin (docs/safety.md).
GUARDIAN_KILL_LEAD = 0.05
# A master starts a lease check this many times per keepalive period. Each passed check
# extends the claim to one keepalive after it started, so one check (or the node's wake-up
# for it, or its confirmation to the guardian) may be late by up to
# ``1 - 1 / LEASE_CHECKS_PER_KEEPALIVE - GUARDIAN_KILL_LEAD`` of a keepalive before the claim
# lapses: 0.70 at 4, against 0.45 at the 2 of ActiveMQ's keepalive. The claim itself does
# not grow, so the takeover wait still covers it (issue 47: on a host at load 2x cores the
# node confirmed 2-65 ms after a deadline that left it 0.45 of a keepalive).
LEASE_CHECKS_PER_KEEPALIVE = 4
# The exit code of a guardian that killed its tree because the claim lapsed unconfirmed
# (or the supervisor died): the node's own safety action, not a failure of the child.
CLAIM_LAPSED_EXIT = 125


@dataclass(frozen=True)
class Timings:
    """All durations in seconds; validated by the configuration before they get here."""

    lock_acquire_sleep_interval_s: float
    lock_keep_alive_period_s: float
    takeover_delay_s: float
    child_max_restarts: int = 3
    child_restart_window_s: float = 60.0
    crash_loop_hold_off_s: float = 10.0
    takeover_drift_margin: float = TAKEOVER_DRIFT_MARGIN

    def takeover_wait(self, previous_keep_alive_period_s: float | None) -> float:
        """Outlast the previous master's claim, even if it used a longer keepalive than ours."""
        if previous_keep_alive_period_s is None:
            return self.takeover_delay_s
        outlast = previous_keep_alive_period_s * (1 + self.takeover_drift_margin)
        return max(self.takeover_delay_s, outlast)

    def priority_delay(self, levels_below: int) -> float:
        """How long a free lock is left to nodes ``levels_below`` priority levels above us."""
        return max(0, levels_below) * self.lock_acquire_sleep_interval_s


# ---- events (what happened) ------------------------------------------------


@dataclass(frozen=True)
class Tick:
    """Time passed; the machine looks at its timers.

    ``collecting_s``: how long this process's garbage collections have held the interpreter
    so far, a running total (0 where nobody measures it; supervisor/shell/collector_time.py).
    A lease check that the share answered cannot be heard while a collection runs, so that
    time is not counted against the share (``RoleCore._io_age``)."""

    collecting_s: float = 0.0


@dataclass(frozen=True)
class LockResult:
    """One try of the lock. ``holder``: who holds it now, for ``/status``; ``error``: the
    share did not answer (not the same as busy)."""

    acquired: bool
    holder: HolderInfo | None = None
    error: str | None = None
    # After a claim refused for ``share_unusable``: the attempt checked the share again
    # first, and this is what it still cannot use (None: all usable, the lock was tried).
    share_unusable: str | None = None


@dataclass(frozen=True)
class EpochClaimed:
    """The epoch is ours; ``previous_keep_alive_period_s`` is the longest keepalive of the earlier
    masters that may still claim the role (``Lease.terms_to_outlast``)."""

    epoch: int
    previous_keep_alive_period_s: float | None = None
    # The master that may have served before us released the lock after it stopped
    # claiming the role (a graceful stop or switchover), or its process has ended: no
    # claim is left to outlast (``Lease.handed_over``, ``Lease.claimant_has_ended``).
    # Positive proof only: a claimant the node could not see is not an ended one.
    nothing_to_outlast: bool = False
    holder: HolderInfo | None = None


@dataclass(frozen=True)
class ClaimFailed:
    """The lock is ours but the epoch record could not be written (a full share, say).

    Not a lost lease: nobody else holds the lock. Retrying at once would burn an
    epoch a try, so the node gives the lock back and holds off, as for a journal
    that cannot open. ``behind_share_floor``: the claim was refused because the
    coordinator has no claim of this epoch, which the share shows was served
    (``/status`` says so until a claim past it is seen). ``share_unusable``: the claim was
    refused because this node cannot use a path on the share (owner or mode,
    ``share/access.py``); until a lock attempt finds it usable again, none is claimed."""

    reason: str
    behind_share_floor: int | None = None
    share_unusable: str | None = None


@dataclass(frozen=True)
class JournalOpened:
    """Recovery finished and the new epoch's fence is durable; the loop now owns ``store``."""

    store: JournalStore


@dataclass(frozen=True)
class JournalFailed:
    reason: str


@dataclass(frozen=True)
class RevalidationPassed:
    """A lease check that started at ``started_at`` (the loop's clock) passed after
    ``duration_s``, at ``finished_unix_s`` (for ``/status``)."""

    started_at: float
    duration_s: float
    finished_unix_s: float


@dataclass(frozen=True)
class LeaseLost:
    reason: str


@dataclass(frozen=True)
class ChildExited:
    returncode: int


@dataclass(frozen=True)
class ServingStopped:
    """Children and connectors are stopped and the lock is released (or abandoned)."""


@dataclass(frozen=True)
class StopRequested:
    reason: str = "stop requested"


@dataclass(frozen=True)
class StepDownRequested:
    reason: str = "step down requested"


@dataclass(frozen=True)
class ServingFailed:
    """Serving could not start (the STOMP port cannot be bound): a failed start, so the node
    steps down and holds off like a crash-looping child, rather than claim epoch after epoch."""

    reason: str


@dataclass(frozen=True)
class MasterLeft:
    """The share says the master went away (released the lock, or the lock file was deleted).

    Only a hint to try the lock now instead of at the next poll: the lock
    decides, not this event.
    """


@dataclass(frozen=True)
class PauseChanged:
    """The group was paused or resumed (maintenance: hold roles, take no automatic action)."""

    paused: bool


@dataclass(frozen=True)
class PriorityChanged:
    priority: Priority


@dataclass(frozen=True)
class TimingsChanged:
    timings: Timings


@dataclass(frozen=True)
class PrePromoteDone:
    """The ``pre_promote`` command of the takeover to ``epoch`` ended: ``vetoed_because`` is
    None if it allowed the takeover."""

    epoch: int
    vetoed_because: str | None


@dataclass(frozen=True)
class PeersSeen:
    """The best priority among other live, eligible nodes (from the share's registry)."""

    best_other_priority: Priority


Event = (
    Tick
    | LockResult
    | EpochClaimed
    | ClaimFailed
    | JournalOpened
    | JournalFailed
    | RevalidationPassed
    | LeaseLost
    | ChildExited
    | ServingStopped
    | StopRequested
    | StepDownRequested
    | ServingFailed
    | MasterLeft
    | PauseChanged
    | PriorityChanged
    | TimingsChanged
    | PeersSeen
    | PrePromoteDone
)


# ---- actions (what the shell must do) --------------------------------------


@dataclass(frozen=True)
class TryLock:
    """Try the lock once, without blocking."""


@dataclass(frozen=True)
class YieldLock:
    """Unlock a just-acquired lock without claiming anything: a higher priority node may take it."""


@dataclass(frozen=True)
class ClaimEpoch:
    """Claim epoch N+1 in the share before anything else is read."""


@dataclass(frozen=True)
class OpenJournal:
    """Recover the journal and fence earlier epochs, under the epoch just claimed."""

    epoch: int


@dataclass(frozen=True)
class RunPrePromote:
    """Run the ``pre_promote`` command (during the takeover wait); report PrePromoteDone."""

    epoch: int


@dataclass(frozen=True)
class Revalidate:
    """Run the lease check; report RevalidationPassed(started_at) or LeaseLost.

    ``promotion``: the check that makes this node master. The shell runs it as
    the journal's commit of the tenure record (whose fencing check is a lease
    check that starts after the write), so every master that ever served has
    its tenure in the journal, stamped just before it served; a failed write
    reports JournalFailed.
    """

    promotion: bool = False


@dataclass(frozen=True)
class StartServing:
    epoch: int


@dataclass(frozen=True)
class RestartChild:
    pass


@dataclass(frozen=True)
class StopServing:
    """Stop children and connectors, then release (graceful) or abandon (lost) the lock."""

    graceful: bool
    reason: str


@dataclass(frozen=True)
class CloseJournal:
    """Close the journal a recovery opened after a stop or demotion overtook it (no record is
    written: the lock is being let go)."""


@dataclass(frozen=True)
class Refused:
    """``event`` does not fit ``state``: it changed nothing. The shell logs it with a code
    (``codes.EVENT_REFUSED``); a refused event that carries a resource has it released."""

    state: str
    event: Event
    why: str


@dataclass(frozen=True)
class RoleChanged:
    old: Role
    new: Role
    epoch: int | None
    reason: str


@dataclass(frozen=True)
class Exit:
    pass


Action = (
    TryLock
    | YieldLock
    | ClaimEpoch
    | OpenJournal
    | RunPrePromote
    | Revalidate
    | StartServing
    | RestartChild
    | StopServing
    | CloseJournal
    | Refused
    | RoleChanged
    | Exit
)
