"""The immutable status snapshot the supervisor publishes and the HTTP handlers read."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

# The role loop publishes a snapshot at least every 0.2 s; one this old means it is stuck.
LOOP_STALL_S = 2.0


@dataclass(frozen=True)
class ShareFinding:
    """One problem the start-up mount check found: its stable code, severity and one line."""

    code: str | None
    severity: str  # "warning" or "refused"
    summary: str


@dataclass(frozen=True)
class ShareCheck:
    """The doctor's verdict on the share's mount when the node started (``primacy run``)."""

    verdict: Literal["fine", "warnings", "refused_but_forced"]
    profile: str | None  # the profile in force; None only for a refused filesystem type
    fs_type: str | None
    mount_point: str | None
    summary: str  # the doctor's one-line verdict, led by the worst problem's code
    findings: tuple[ShareFinding, ...] = ()


@dataclass(frozen=True)
class StatusSnapshot:
    """One consistent view of a node. Monotonic times use ``time.monotonic`` of this process."""

    node: str
    role: str
    epoch: int | None
    since_unix_s: float
    priority: str
    master_claim_expires_monotonic: float = float("-inf")
    built_at_monotonic: float = field(default_factory=time.monotonic)
    lock_io_overdue_monotonic: float = float("inf")
    last_keepalive_unix_s: float | None = None
    last_keepalive_duration_s: float | None = None
    lock_holder: dict[str, Any] | None = None
    first_lock_attempt_done: bool = False
    lock_attempt_error: str | None = None  # the last lock attempt failed with this error
    waiting_for: str | None = None  # a master's exec child not ready yet: what it waits for
    version: str = ""
    share: str = ""
    share_check: ShareCheck | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def is_serving_master(self, now_monotonic: float | None = None) -> bool:
        """A master claims the role only while its last lease check is under one keepalive old."""
        now = time.monotonic() if now_monotonic is None else now_monotonic
        return (
            self.role == "master"
            and self.waiting_for is None
            and now < self.master_claim_expires_monotonic
        )

    def is_healthy_slave(self) -> bool:
        """A slave whose last lock attempt reached the share (found the lock busy)."""
        return self.role == "slave" and self.lock_attempt_error is None

    def is_live(self, now_monotonic: float | None = None) -> bool:
        """False once the role loop stalls or a lock operation overruns its deadline."""
        now = time.monotonic() if now_monotonic is None else now_monotonic
        return now < self.built_at_monotonic + LOOP_STALL_S and now < self.lock_io_overdue_monotonic

    def is_ready(self) -> bool:
        """The node has tried the lock once and, if it holds it, has recovered the journal and
        its exec child is ready."""
        return (
            self.first_lock_attempt_done
            and self.role in ("slave", "master")
            and self.waiting_for is None
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for internal in (
            "master_claim_expires_monotonic",
            "built_at_monotonic",
            "lock_io_overdue_monotonic",
        ):
            data.pop(internal)
        data["since"] = datetime.fromtimestamp(self.since_unix_s, UTC).isoformat(
            timespec="milliseconds"
        )
        data["live"] = self.is_live()
        data["serving"] = self.is_serving_master()
        data.update(data.pop("extra"))
        return data
