"""The locks of one host on the real server: one NFSv4 client per held lock.

Each FUSE lock owner's lock is taken by a fresh libnfs client, so each lock
owner is its own NFSv4 lock owner (libnfs names a context's lock owners after
its client name), and an attempt the server denies leaves nothing behind:
libnfs 4.0 does not advance the open owner's seqid after NFS4ERR_DENIED, and
every later call of that context then fails with NFS4ERR_BAD_SEQID, so a
denied client is thrown away. Whole-file locks only: that is all primacy takes.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass, field

from mfusepy import FuseOSError

from tests.harness.ganesha.libnfs import NfsClient, NfsError

log = logging.getLogger("nfsreal")


@dataclass
class ServerLink:
    """How this host reaches the server."""

    server: str
    export: str
    host_name: str
    timeout_ms: int
    lease_s: float
    slow_ms: float = 0.0
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def connect(self, role: str) -> NfsClient:
        return NfsClient(self.server, self.export, f"{self.host_name}-{role}", self.timeout_ms)

    def fresh_name(self, role: str) -> str:
        return f"{role}{next(self._names)}"

    def delay(self) -> None:
        if self.slow_ms:
            time.sleep(self.slow_ms / 1000)  # a slow server: every reply late


@dataclass
class _HeldLock:
    """A lock of one FUSE lock owner on one file, held by its own NFSv4 client."""

    client: NfsClient
    handle: int
    kind: int
    lost: bool = False


class LockOwners:
    """The locks this host holds, by (path on the server, FUSE lock owner)."""

    def __init__(self, link: ServerLink) -> None:
        self.link = link
        self._mutex = threading.Lock()
        self._held: dict[tuple[str, int], _HeldLock] = {}

    def lock(self, path: str, owner: int, kind: int) -> bool:
        """Take or re-assert ``owner``'s lock on ``path``; False if another client holds it."""
        with self._mutex:
            held = self._held.get((path, owner))
        if held is not None:
            self._reassert(held, kind)
            return True
        return self._try_new(path, owner, kind)

    def _try_new(self, path: str, owner: int, kind: int) -> bool:
        """One LOCK from a fresh client; keep it if granted, throw it away if denied."""
        self.link.delay()
        try:
            client = self.link.connect(self.link.fresh_name("lock"))
        except NfsError as error:
            raise FuseOSError(error.errno or errno.EIO) from None
        try:
            handle = client.open(path, os.O_RDWR)
            client.set_lock(handle, kind, 0, 0)
        except NfsError as error:
            client.close_context()
            if error.errno == errno.EAGAIN:
                return False
            raise FuseOSError(errno.EIO if error.state_lost else error.errno or errno.EIO) from None
        with self._mutex:
            self._held[(path, owner)] = _HeldLock(client, handle, kind)
        return True

    def _reassert(self, held: _HeldLock, kind: int) -> None:
        """A LOCK on the held lock: goes to the server, which says if it still stands."""
        self.link.delay()
        if held.lost:
            raise FuseOSError(errno.EIO)
        try:
            held.client.set_lock(held.handle, kind, 0, 0)
        except NfsError as error:
            if error.state_lost or error.errno == errno.EAGAIN:
                # Expired (or revoked and given to another client): lost for good,
                # as the kernel client reports a lock it could not recover.
                held.lost = True
                log.warning("lock lost: %s", error.status or error)
            raise FuseOSError(errno.EIO) from None
        held.kind = kind

    def test(self, path: str, kind: int) -> int:
        """F_GETLK: would this lock be granted? Asked of the server with a throwaway client."""
        client = self.link.connect(self.link.fresh_name("lock"))
        try:
            handle = client.open(path, os.O_RDWR)
            client.set_lock(handle, kind, 0, 0)
            client.set_lock(handle, fcntl.F_UNLCK, 0, 0)
            return fcntl.F_UNLCK
        except NfsError as error:
            if error.errno == errno.EAGAIN:
                return fcntl.F_WRLCK
            raise FuseOSError(errno.EIO) from None
        finally:
            client.close_context()

    def unlock(self, path: str, owner: int) -> None:
        with self._mutex:
            held = self._held.pop((path, owner), None)
        if held is not None:
            self._drop(held)

    def unlock_owner(self, owner: int) -> None:
        with self._mutex:
            keys = [key for key in self._held if key[1] == owner]
            held = [self._held.pop(key) for key in keys]
        for lock in held:
            self._drop(lock)

    def renew(self) -> None:
        """A READ through every held lock's client renews its lease (libnfs sends no RENEW)."""
        with self._mutex:
            held = [lock for lock in self._held.values() if not lock.lost]
        for lock in held:
            try:
                lock.client.pread(lock.handle, 1, 0)
            except NfsError as error:
                if error.state_lost:
                    lock.lost = True
                    log.warning("lock lost: %s", error.status or error)
                log.info("renewal of a lock failed: %s", error)

    def close(self) -> None:
        with self._mutex:
            held = list(self._held.values())
            self._held.clear()
        for lock in held:
            self._drop(lock)

    @staticmethod
    def _drop(held: _HeldLock) -> None:
        try:
            if not held.lost:
                held.client.set_lock(held.handle, fcntl.F_UNLCK, 0, 0)
                held.client.close(held.handle)
        except OSError as exc:  # cut link: the server expires the lock with the client
            log.info("unlock failed: %s", exc)
        finally:
            held.client.close_context()
