"""The share port's implementations, as test parameters: every contract test runs on each."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from primacy.cli.localgroup import wait_until
from primacy.share.memory import MemoryShare
from primacy.share.port import SharePort
from primacy.share.posix import PosixShare
from primacy.share.posix_lock import LockMethod
from primacy.share.zookeeper import ZooKeeperShare
from primacy.share.zookeeper_access import ZooKeeperAccess

# A factory of handles on one share: each call is another node.
Handles = Callable[[], SharePort]
KINDS = ["posix-flock", "posix-lockf", "memory", "zookeeper"]
# POSIX record locks (lockf) belong to the process, not the handle (DESIGN.md's pitfall): two
# handles in one process do not exclude each other. Tests that lock from two handles in one
# process run on these; tests/share/test_posix_lock.py checks lockf across real processes.
IN_PROCESS_LOCK_KINDS = ["posix-flock", "memory", "zookeeper"]


def kind_params(kinds: list[str]) -> list[Any]:
    """``kinds`` as test parameters, ZooKeeper's with its marker (it needs an ensemble)."""
    return [pytest.param(k, marks=pytest.mark.zookeeper) if k == "zookeeper" else k for k in kinds]


def handles_for(kind: str, root: Path) -> Handles:
    """Handles on a share of a file kind, or in memory (ZooKeeper's: ``zookeeper_handles``)."""
    if kind == "memory":
        return MemoryShare().handle
    method = LockMethod.FLOCK if kind == "posix-flock" else LockMethod.POSIX
    return lambda: PosixShare(root, method)


def zookeeper_handles(
    hosts: str, path: str, opened: list[ZooKeeperShare], access: ZooKeeperAccess | None = None
) -> Handles:
    """Handles on one group's znodes in a running ensemble, each its own session (with
    ``access``: the group's identity and TLS), connected before it is handed out; the caller
    closes ``opened``."""

    def handle() -> ZooKeeperShare:
        port = ZooKeeperShare(hosts, path, session_timeout_s=4.0, access=access)
        opened.append(port)
        wait_until(lambda: port.session_state == "connected", 30, "a ZooKeeper session")
        return port

    return handle
