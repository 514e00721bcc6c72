"""The records primacy keeps on the share, typed: each is encoded and decoded here and nowhere else.

Everything read from the share is hostile input: a decoder returns ``None`` (or a
field's safe default) for anything that is not exactly what primacy writes, and
never raises on content. The safe default of a field is the one that makes a
node wait longer, never shorter (docs/safety.md: shortcuts rest on positive proof).
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
import socket
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

# Epochs are u64 wherever they are written (journal headers); past this a share is refused.
MAX_EPOCH = 2**63 - 1
# An epoch record is a small JSON object; anything larger is not one of ours.
MAX_RECORD_BYTES = 64 * 1024
# The lock file's holder record is read through the held descriptor, this much at most.
MAX_HOLDER_BYTES = 4096
# How far ahead of this host's clock another host's timestamp may be and still count.
MAX_CLOCK_SKEW_S = 60.0
# A registry entry not refreshed for this long is a node that is gone.
LIVE_WINDOW_S = 10.0


class Role(enum.StrEnum):
    """A node's role as everyone outside its role machine sees it: ``/status``, the registry
    (``NodeEntry.role``), systemd, the metrics, and the role changes the journal keeps
    (``RoleChange``). Spelled here once; the role machine's states map onto it
    (``supervisor/machine/role_table.py``)."""

    STARTING = "starting"
    SLAVE = "slave"
    ACQUIRED = "acquired"
    MASTER = "master"
    DEMOTING = "demoting"
    STOPPING = "stopping"
    STOPPED = "stopped"


def parse_role(text: str) -> Role | None:
    """The role a record names, whatever its case (a journal's early role records wrote
    ``MASTER``), or None for anything else."""
    try:
        return Role(text.lower())
    except ValueError:
        return None


# Roles in which a node may still hold the lock: a registry entry leaving them is a hint that
# the lock is free (a node's role as ``NodeEntry.role`` writes it).
HOLDING_ROLES = frozenset({Role.ACQUIRED, Role.MASTER, Role.STOPPING, Role.DEMOTING})
# A switchover whose target has not taken over by then no longer holds other nodes back.
SWITCHOVER_TIMEOUT_S = 15.0

_BOOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PID_NAMESPACE = re.compile(r"pid:\[[0-9]{1,20}\]")
_MAX_PID = 2**22  # the kernel's PID_MAX_LIMIT


def parse_epoch_name(name: str) -> int | None:
    """The epoch an ``epochs/`` entry names, or None: only canonical ASCII digits count.

    The share is untrusted input: ``²`` passes ``str.isdigit`` but not ``int``, ``007``
    and ``+7`` are not names a node writes, and an absurd number is refused.
    """
    if not (name.isascii() and name.isdigit()) or (name.startswith("0") and name != "0"):
        return None
    epoch = int(name)
    return epoch if 0 < epoch <= MAX_EPOCH else None


def _json_line(content: dict[str, Any]) -> bytes:
    return (json.dumps(content, sort_keys=True) + "\n").encode()


def _loads_object(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data.decode())
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return value if isinstance(value, dict) else None


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def _number(value: object) -> float | None:
    """A finite JSON number (not a bool, not NaN or an infinity), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class ProcessIdentity:
    """A process of one kernel: boot id and PID namespace (so a PID means the same process to
    whoever reads it on that kernel), PID, and start time in clock ticks since boot (so a
    reused PID is not mistaken for it). ``locker/claimant.py`` reads the kernel's side."""

    boot_id: str
    pid_namespace: str
    pid: int
    start_ticks: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: object) -> ProcessIdentity | None:
        """Exactly what ``to_json`` writes, or None: an identity that is anything else says
        nothing about any process."""
        if not isinstance(raw, dict):
            return None
        boot_id, namespace = raw.get("boot_id"), raw.get("pid_namespace")
        pid, start = raw.get("pid"), raw.get("start_ticks")
        if not (
            isinstance(boot_id, str)
            and _BOOT_ID.fullmatch(boot_id)
            and isinstance(namespace, str)
            and _PID_NAMESPACE.fullmatch(namespace)
            and type(pid) is int
            and 0 < pid < _MAX_PID
            and type(start) is int
            and start >= 0
        ):
            return None
        return cls(boot_id, namespace, pid, start)


@dataclass(frozen=True)
class EpochRecord:
    """``epochs/N``: who claimed epoch N and on what terms; the next claimant reads it to learn
    how long to wait before serving (docs/safety.md).

    ``outlasted``: its master outlasted every earlier claim (so it may have served); a record
    written before the term existed counts as outlasted. ``released``: its master had stopped
    claiming the role when it let the lock go. ``exec_child``: its master supervised an exec
    child, whose death its claim bounds; None when the record does not say.
    """

    epoch: int
    node_id: str | None = None
    host: str | None = None
    pid: int | None = None
    claimed_unix_s: float | None = None
    process: ProcessIdentity | None = None
    outlasted: bool = True
    released: bool = False
    lock_keep_alive_period_ms: float | None = None
    exec_child: bool | None = None

    @classmethod
    def claim(
        cls,
        node_id: str,
        process: ProcessIdentity | None,
        lock_keep_alive_period_ms: float | None,
        exec_child: bool,
    ) -> EpochRecord:
        """The record a node writes as it claims an epoch (its number filled in by the claim)."""
        return cls(
            epoch=0,
            node_id=node_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            claimed_unix_s=time.time(),
            process=process,
            outlasted=False,  # until the takeover wait is over
            lock_keep_alive_period_ms=lock_keep_alive_period_ms,
            exec_child=exec_child,
        )

    def numbered(self, epoch: int) -> EpochRecord:
        return replace(self, epoch=epoch)

    def to_bytes(self) -> bytes:
        return _json_line(self.to_json())

    def to_json(self) -> dict[str, Any]:
        content: dict[str, Any] = {"epoch": self.epoch}
        for name in ("node_id", "host", "pid", "claimed_unix_s", "lock_keep_alive_period_ms"):
            if (value := getattr(self, name)) is not None:
                content[name] = value
        if self.process is not None:
            content["process"] = self.process.to_json()
        content["outlasted"] = self.outlasted
        if self.released:
            content["released"] = True
        if self.exec_child is not None:
            content["exec_child"] = self.exec_child
        return content

    @classmethod
    def from_bytes(cls, epoch: int, data: bytes) -> EpochRecord | None:
        """The record of ``epoch`` (the file's name decides the number), or None if it is not
        a JSON object. Each field that is not what a node writes takes its safe default:
        ``outlasted`` anything but a bool is False (the next claimant waits for more claims,
        never fewer), ``released`` counts only when exactly true, a keepalive only when a
        finite non-negative number."""
        raw = _loads_object(data)
        if raw is None:
            return None
        outlasted = raw.get("outlasted", True)
        keep_alive = _number(raw.get("lock_keep_alive_period_ms"))
        exec_child = raw.get("exec_child")
        return cls(
            epoch=epoch,
            node_id=_str(raw.get("node_id")),
            host=_str(raw.get("host")),
            pid=_int(raw.get("pid")),
            claimed_unix_s=_number(raw.get("claimed_unix_s")),
            process=ProcessIdentity.from_json(raw.get("process")),
            outlasted=outlasted if isinstance(outlasted, bool) else False,
            released=raw.get("released") is True,
            lock_keep_alive_period_ms=keep_alive if keep_alive is None or keep_alive >= 0 else None,
            exec_child=exec_child if isinstance(exec_child, bool) else None,
        )


@dataclass(frozen=True)
class HolderInfo:
    """Who holds (or last held) the lock, as written into the lock file."""

    node_id: str
    host: str
    pid: int
    since_unix_s: float
    epoch: int | None
    released: bool = False

    def to_bytes(self) -> bytes:
        return _json_line(asdict(self))

    @classmethod
    def from_bytes(cls, data: bytes) -> HolderInfo | None:
        """Parse a holder record; ``None`` for an empty or foreign file."""
        raw = _loads_object(data)
        if raw is None:
            return None
        since = _number(raw.get("since_unix_s"))  # NaN or 1e999 is no time (issue 27)
        if since is None:
            return None
        try:
            return cls(
                node_id=str(raw["node_id"]),
                host=str(raw["host"]),
                pid=int(raw["pid"]),
                since_unix_s=since,
                epoch=None if raw.get("epoch") is None else int(raw["epoch"]),
                released=bool(raw.get("released", False)),
            )
        except (ValueError, KeyError, TypeError, OverflowError):
            return None

    @classmethod
    def for_this_process(
        cls, node_id: str, epoch: int | None, released: bool = False
    ) -> HolderInfo:
        return cls(node_id, socket.gethostname(), os.getpid(), time.time(), epoch, released)


@dataclass(frozen=True)
class NodeEntry:
    """``nodes/<node-id>.json``: one node of the group, rewritten every registry refresh."""

    node_id: str
    host: str
    pid: int
    http: str
    priority: str
    role: str
    epoch: int | None
    updated_unix_s: float

    def is_live(self, now_unix_s: float) -> bool:
        """Refreshed lately; a timestamp from the future (planted, or a clock far ahead) is not
        a way to stay live forever."""
        age = now_unix_s - self.updated_unix_s
        return -MAX_CLOCK_SKEW_S <= age < LIVE_WINDOW_S

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> NodeEntry | None:
        updated = _number(raw.get("updated_unix_s"))  # NaN or 1e999 is no time (issue 27)
        if updated is None:
            return None
        try:
            return cls(
                node_id=str(raw["node_id"]),
                host=str(raw["host"]),
                pid=int(raw["pid"]),
                http=str(raw["http"]),
                priority=str(raw["priority"]),
                role=str(raw["role"]),
                epoch=None if raw.get("epoch") is None else int(raw["epoch"]),
                updated_unix_s=updated,
            )
        except (ValueError, KeyError, TypeError, OverflowError):
            return None


@dataclass(frozen=True)
class Switchover:
    """The master of ``epoch`` hands over to ``to_node``; others keep off until ``until_unix_s``."""

    from_node: str
    to_node: str
    epoch: int
    until_unix_s: float

    def holds_back(self, node_id: str, latest_epoch: int, now_unix_s: float) -> bool:
        """Whether ``node_id`` must leave a free lock to the switchover's target."""
        return (
            self.epoch == latest_epoch
            and now_unix_s < self.until_unix_s
            and node_id != self.to_node
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any], now_unix_s: float) -> Switchover | None:
        """The marker, or None if damaged. A marker holds others back for
        ``SWITCHOVER_TIMEOUT_S`` at most; one that claims longer (planted, or from a host whose
        clock runs far ahead) holds nobody back."""
        try:
            switchover = cls(
                str(raw["from_node"]),
                str(raw["to_node"]),
                int(raw["epoch"]),
                float(raw["until_unix_s"]),
            )
        except (ValueError, KeyError, TypeError, OverflowError):
            return None
        if not switchover.until_unix_s <= now_unix_s + SWITCHOVER_TIMEOUT_S + MAX_CLOCK_SKEW_S:
            return None  # NaN included
        return switchover


@dataclass(frozen=True)
class PauseMarker:
    """The group is paused for maintenance: who paused it, when."""

    by: str
    at_unix_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RoleChange:
    """A node's role change, journaled as a CONTROL record's JSON body (docs/journal-format.md)."""

    node: str | None
    from_role: str
    to_role: str
    epoch: int | None
    reason: str | None

    EVENT = "role"

    def to_json(self) -> dict[str, Any]:
        return {
            "event": self.EVENT,
            "node": self.node,
            "from": self.from_role,
            "to": self.to_role,
            "epoch": self.epoch,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> RoleChange | None:
        """The role change a CONTROL record holds, or None if it holds another kind of event."""
        if payload.get("event") != cls.EVENT:
            return None
        return cls(
            node=_str(payload.get("node")),
            from_role=str(payload.get("from", "")),
            to_role=str(payload.get("to", "")),
            epoch=_int(payload.get("epoch")),
            reason=_str(payload.get("reason")),
        )
