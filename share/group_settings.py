"""What every node of a group must agree on, recorded on the share when the group is created.

Two nodes that lock the share differently never see each other's lock: on Linux a
``flock`` and a POSIX (``lockf``) lock of one file are independent, so a node started with
the other method takes "the lock" beside the master and claims an epoch (the fence saves
the data, and the master stops; issue 45). Likewise a node coordinating on the share's
files beside nodes on ZooKeeper, or on another ZooKeeper path. The first node to start
records its settings in ``group.json`` with an exclusive create (two first nodes cannot
both record; a node that reads the file between its creation and its content waits for
the content); every node compares its own with the record before it touches the lock.
Not written aside and linked into place: a FUSE filesystem need not implement link() (the
test harness's NFS client over FUSE does not).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Any

from primacy.share import safe_io
from primacy.share.layout import ShareLayout
from primacy.share.posix_lock import LockMethod

COORDINATIONS = ("share", "zookeeper")
# How long a node waits for the record another node is writing at this instant.
_RECORD_WAIT_S = 2.0


class GroupSettingsUnreadable(OSError):
    """``group.json`` exists but holds no settings this release can read."""


@dataclass(frozen=True)
class GroupSettings:
    """The settings the group's nodes share, and who recorded them when."""

    lock_method: str
    coordination: str = "share"
    zookeeper_path: str | None = None  # where the lock and epochs are, on ZooKeeper
    recorded_by: str | None = None
    recorded_at_unix_s: float | None = None

    def differences(self, mine: GroupSettings) -> list[tuple[str, str, str]]:
        """(key, recorded, mine) for each setting ``mine`` does not share with the record."""
        found = []
        for key in ("lock_method", "coordination", "zookeeper_path"):
            recorded, wanted = getattr(self, key), getattr(mine, key)
            if recorded != wanted:
                found.append((key, str(recorded), str(wanted)))
        return found

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> GroupSettings | None:
        """The settings ``raw`` records, or None if it is not a record this release wrote."""
        lock_method, coordination = raw.get("lock_method"), raw.get("coordination", "share")
        path, by = raw.get("zookeeper_path"), raw.get("recorded_by")
        at = raw.get("recorded_at_unix_s")
        if lock_method not in list(LockMethod) or coordination not in COORDINATIONS:
            return None
        if not (path is None or isinstance(path, str)) or not (by is None or isinstance(by, str)):
            return None
        if not (at is None or isinstance(at, int | float)):
            return None
        return cls(lock_method, coordination, path, by, at)


def read_group_settings(layout: ShareLayout) -> GroupSettings | None:
    """The recorded settings; None if none are recorded. GroupSettingsUnreadable if the file is
    there but not readable as settings (never guessed: a node must not pick a lock method)."""
    try:
        raw = safe_io.read_json(layout.group_settings, share_root=True)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise GroupSettingsUnreadable(f"{layout.group_settings} cannot be read: {exc}") from exc
    settings = GroupSettings.from_json(raw)
    if settings is None:
        raise GroupSettingsUnreadable(f"{layout.group_settings} holds no group settings")
    return settings


def settled_group_settings(layout: ShareLayout) -> GroupSettings | None:
    """``read_group_settings``, but a record another node is writing at this instant (created
    empty by ``agree_group_settings``, its content not there yet) is waited for: it is
    unreadable only if it stays so for ``_RECORD_WAIT_S``. Three nodes started at once under
    load made the third refuse its start on the first node's empty record as unreadable."""
    try:
        return read_group_settings(layout)
    except GroupSettingsUnreadable:
        return _wait_for_record(layout)


def agree_group_settings(layout: ShareLayout, mine: GroupSettings) -> GroupSettings:
    """The group's settings: the record, or ``mine`` recorded now if there is none yet (a new
    group, or one older than the record). The caller compares them with its own."""
    recorded = settled_group_settings(layout)
    if recorded is not None:
        return recorded
    record = GroupSettings(
        mine.lock_method, mine.coordination, mine.zookeeper_path, mine.recorded_by, time.time()
    )
    try:
        fd = safe_io.create_exclusive(layout.group_settings, share_root=True)
    except FileExistsError:  # another node records its settings at this instant: theirs hold
        return _wait_for_record(layout)
    try:
        os.write(fd, (json.dumps(record.to_json(), sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    safe_io.fsync_directory(layout.root, share_root=True)
    return record


def _wait_for_record(layout: ShareLayout) -> GroupSettings:
    """The record another node created a moment ago, once its content is there."""
    deadline = time.monotonic() + _RECORD_WAIT_S
    while True:
        try:
            recorded = read_group_settings(layout)
        except GroupSettingsUnreadable:
            if time.monotonic() >= deadline:
                raise
            recorded = None
        if recorded is not None:
            return recorded
        if time.monotonic() >= deadline:
            raise GroupSettingsUnreadable(f"{layout.group_settings} came and went")
        time.sleep(0.02)
