"""The share port's implementations, as test parameters: every contract test runs on each."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from primacy.share.memory import MemoryShare
from primacy.share.port import SharePort
from primacy.share.posix import PosixShare
from primacy.share.posix_lock import LockMethod

# A factory of handles on one share: each call is another node.
Handles = Callable[[], SharePort]
KINDS = ["posix-flock", "posix-lockf", "memory"]
# POSIX record locks (lockf) belong to the process, not the handle (DESIGN.md's pitfall): two
# handles in one process do not exclude each other. Tests that lock from two handles in one
# process run on these; tests/share/test_posix_lock.py checks lockf across real processes.
IN_PROCESS_LOCK_KINDS = ["posix-flock", "memory"]


def handles_for(kind: str, root: Path) -> Handles:
    if kind == "memory":
        return MemoryShare().handle
    method = LockMethod.FLOCK if kind == "posix-flock" else LockMethod.POSIX
    return lambda: PosixShare(root, method)
