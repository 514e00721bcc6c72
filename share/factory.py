"""The one place a share port is built: on the share's own files or on ZooKeeper, for a node or
for a reader.

Callers say where the group's records live (``GroupLocation``) and get the port
(``share/port.py``), never an implementation by name: the node (``open_port``), the
read-only commands and the replay (``reading``, a ``ShareObserver``), and the two
commands that administer what only ZooKeeper has, its ACLs and its epoch counter
(``open_zookeeper``). The ZooKeeper client is imported only where one is built, so the
package needs kazoo only there (``pip install 'primacy[zookeeper]'``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from primacy.share.port import ShareObserver, SharePort
from primacy.share.posix import PosixShare
from primacy.share.posix_lock import LockMethod

if TYPE_CHECKING:
    from primacy.share.zookeeper import ZooKeeperShare
    from primacy.share.zookeeper_access import ZooKeeperAccess

DEFAULT_ZOOKEEPER_PATH = "/primacy"  # the zookeeper_path key's default
# What a reader waits for the ensemble: a person at a terminal or a batch job, not a lease check.
READER_WAIT_S = 5.0


class GroupUnreadable(Exception):
    """The group's records cannot be read; the message says where and why."""


@dataclass(frozen=True)
class GroupLocation:
    """Where a group's lock, epochs and registry live: the share's own files, or with
    ``zookeeper_hosts`` the znodes under ``zookeeper_path`` (the journal stays on the share
    either way). ``access``: the identity and TLS files for the ensemble."""

    share: Path
    zookeeper_hosts: str | None = None
    zookeeper_path: str = DEFAULT_ZOOKEEPER_PATH
    access: ZooKeeperAccess | None = None
    lock_method: LockMethod = LockMethod.FLOCK

    @property
    def where(self) -> str:
        """For messages: the share, or the path on the ensemble."""
        if self.zookeeper_hosts is None:
            return str(self.share)
        return f"{self.zookeeper_path} on {self.zookeeper_hosts}"


def open_port(
    location: GroupLocation,
    *,
    session_timeout_s: float = 10.0,
    request_timeout_s: float | None = None,
    on_session_state: Callable[[str], None] | None = None,
    on_planted_epoch: Callable[[int], None] | None = None,
) -> SharePort:
    """A node's port. ``on_session_state`` hears each change of a coordination service's
    session, on that client's thread (post, never block)."""
    if location.zookeeper_hosts is None:
        return PosixShare(location.share, location.lock_method)
    from primacy.share.zookeeper import ZooKeeperShare

    return ZooKeeperShare(
        location.zookeeper_hosts,
        location.zookeeper_path,
        session_timeout_s=session_timeout_s,
        request_timeout_s=request_timeout_s,
        on_session_state=on_session_state,
        on_planted_epoch=on_planted_epoch,
        access=location.access,
    )


def open_zookeeper(
    location: GroupLocation,
    *,
    session_timeout_s: float = READER_WAIT_S,
    request_timeout_s: float = READER_WAIT_S,
    secure_group: bool = False,
) -> ZooKeeperShare:
    """A handle for what only ZooKeeper has (the group's ACLs, its epoch counter's repair),
    connected, or waited for ``request_timeout_s``; ``secure_group`` as a node's handle."""
    assert location.zookeeper_hosts is not None, "a ZooKeeper location"
    from primacy.share.zookeeper import ZooKeeperShare

    port = ZooKeeperShare(
        location.zookeeper_hosts,
        location.zookeeper_path,
        session_timeout_s=session_timeout_s,
        request_timeout_s=request_timeout_s,
        access=location.access,
        secure_group=secure_group,
    )
    deadline = time.monotonic() + request_timeout_s
    while port.session_state != "connected" and time.monotonic() < deadline:
        time.sleep(0.05)  # kazoo connects on its own thread; requests need the session
    return port


@contextmanager
def reading(location: GroupLocation, wait_s: float = READER_WAIT_S) -> Iterator[ShareObserver]:
    """A reader's port on the group: it creates nothing and refuses a share or path no group
    has used (GroupUnreadable), rather than show a group that never ran. The group's znodes
    are readable by anyone (docs/operator-guide.md, "ZooKeeper access"): a reader needs only
    the TLS files of an ensemble that speaks TLS."""
    if location.zookeeper_hosts is None:
        share = PosixShare(location.share, reader=True)
        if not share.group_exists():
            raise GroupUnreadable(
                f"the share {location.share} does not exist or is not a directory"
            )
        yield share
        return
    try:
        import primacy.share.zookeeper  # noqa: F401  (kazoo is the zookeeper extra's)
    except ImportError as exc:
        raise GroupUnreadable(
            f"reading a ZooKeeper group needs kazoo (pip install 'primacy[zookeeper]'): {exc}"
        ) from exc
    zookeeper = open_zookeeper(location, session_timeout_s=wait_s, request_timeout_s=wait_s)
    try:
        try:
            used = zookeeper.group_exists()
        except OSError as exc:
            raise GroupUnreadable(
                f"the ensemble {location.zookeeper_hosts} does not answer: {exc}"
            ) from exc
        if not used:
            raise GroupUnreadable(f"no primacy group has used {location.where}")
        yield zookeeper
    finally:
        zookeeper.close()
