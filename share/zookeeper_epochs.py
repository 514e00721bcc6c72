"""The epoch on ZooKeeper: a counter znode whose version is the latest claim (docs/safety.md,
"Coordination on ZooKeeper" and "The epoch floor").

Its data is the latest claimed epoch and its version equals it, because the only writes
it ever gets are claims: a claim sets it to N+1 with expected version N *and* creates
``epochs/N+1`` with the record, in one transaction. Two claims of one number cannot both
commit, and no number is skipped. ``epoch_exists`` is the lease check's question ("was N+1
claimed?"): every answer rests on a quorum operation, a transaction of one version check
that succeeded, which ZooKeeper orders with every claim; a plain read may be served by a
server behind the leader, and ``sync`` is not a quorum operation (a deposed leader may
still answer one), so neither is proof. The handle remembers the highest value it
confirmed: the counter only grows, so a confirmed value below it was reset
(``EpochCounterWentBack``), and every answer after is suspect.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import (  # type: ignore[import-untyped]
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
)

from primacy.share.port import EpochCounterWentBack
from primacy.share.records import EpochRecord

# A znode's version is a signed 32-bit integer; the counter's version is the epoch.
MAX_ZOOKEEPER_EPOCH = 2**31 - 1


class EpochCounter:
    """One handle's view of a group's counter (``epoch``) and epoch records (``epochs/N``).

    ``znode(*names)`` names a znode of the group; ``wait(async_result)`` is the handle's
    request with its timeout, failures read as ``OSError``; ``on_planted_epoch(N)`` hears
    of a claim that replaced an ``epochs/N`` no claim wrote."""

    def __init__(
        self,
        client: Any,
        znode: Callable[..., str],
        wait: Callable[[Any], Any],
        request_timeout_s: float,
        on_planted_epoch: Callable[[int], None] | None = None,
    ) -> None:
        self.client = client
        self._znode = znode
        self._wait = wait
        self.request_timeout_s = request_timeout_s
        self.on_planted_epoch = on_planted_epoch
        # The highest counter value this handle has confirmed (its own claims included).
        self._highest_counter = 0

    def claim(self, record: EpochRecord) -> int:
        """Claim the counter's next number with ``record`` (``SharePort.claim_epoch``)."""
        counter = self._znode("epoch")
        while True:
            latest = self._claims_counter()
            if latest < self._highest_counter and self._counter_is_at(latest):
                raise EpochCounterWentBack(self._highest_counter, latest)
            epoch = latest + 1
            if epoch > MAX_ZOOKEEPER_EPOCH:
                raise OSError(f"no epoch left to claim on ZooKeeper (past {MAX_ZOOKEEPER_EPOCH})")
            numbered = record.numbered(epoch).to_bytes()
            transaction = self.client.transaction()
            transaction.set_data(counter, str(epoch).encode(), version=latest)
            transaction.create(self._znode("epochs", str(epoch)), numbered)
            results = self._wait(transaction.commit_async())
            if not any(isinstance(result, Exception) for result in results):
                self._highest_counter = epoch
                return epoch
            if isinstance(results[0], RolledBackError) and isinstance(results[1], NodeExistsError):
                # The counter was at ``latest`` (its check passed) yet epochs/<latest+1>
                # exists: no claim wrote it (a claim moves the counter in the same step).
                if self._replace_planted(latest, numbered):
                    self._highest_counter = epoch
                    if self.on_planted_epoch is not None:
                        self.on_planted_epoch(epoch)
                    return epoch
                continue
            if not isinstance(results[0], BadVersionError):
                failure = next(result for result in results if isinstance(result, Exception))
                raise OSError(errno.EIO, f"claiming epoch {epoch} failed: {failure!r}")
            # Another node claimed it first: the next number.

    def _replace_planted(self, latest: int, numbered: bytes) -> bool:
        """Claim ``latest + 1`` over an epoch znode written outside the protocol, in one
        transaction that also checks the counter is still at ``latest``; False if something
        moved meanwhile (the caller reads the counter again)."""
        epoch_node = self._znode("epochs", str(latest + 1))
        transaction = self.client.transaction()
        transaction.set_data(self._znode("epoch"), str(latest + 1).encode(), version=latest)
        transaction.delete(epoch_node)
        transaction.create(epoch_node, numbered)
        results = self._wait(transaction.commit_async())
        failures = [result for result in results if isinstance(result, Exception)]
        if not failures:
            return True
        if any(isinstance(f, BadVersionError | NoNodeError | NodeExistsError) for f in failures):
            return False
        raise OSError(errno.EIO, f"claiming epoch {latest + 1} failed: {failures[0]!r}")

    def _counter_is_at(self, version: int) -> bool:
        """A quorum check that the counter's version is ``version`` (a plain read is no proof)."""
        transaction = self.client.transaction()
        transaction.check(self._znode("epoch"), version)
        (result,) = self._wait(transaction.commit_async())
        if isinstance(result, Exception) and not isinstance(result, BadVersionError):
            raise OSError(errno.EIO, f"checking the epoch counter failed: {result!r}")
        return not isinstance(result, Exception)

    def exists(self, epoch: int) -> bool:
        """Whether ``epoch`` was claimed, on a quorum's word (``SharePort.epoch_exists``)."""
        if epoch < 1 or epoch - 1 > MAX_ZOOKEEPER_EPOCH:
            return False  # the counter's version is a 32-bit integer: no claim goes past it
        deadline = time.monotonic() + self.request_timeout_s
        guess = epoch - 1  # the lease check's case: its own epoch is the latest claim
        while True:
            # A quorum operation, ordered with every claim: its success proves the counter
            # was at ``guess`` then. A failure proves only "not ``guess``", and the plain read
            # that gives the next guess may be served by a server that is behind, so no
            # answer rests on a read: each is confirmed by a check that succeeded.
            if self._counter_is_at(guess):
                if guess < self._highest_counter:
                    raise EpochCounterWentBack(self._highest_counter, guess)
                self._highest_counter = guess
                return epoch <= guess
            if time.monotonic() >= deadline:
                raise OSError(
                    errno.ETIMEDOUT, f"the epoch counter kept changing while checking {epoch}"
                )
            _, stat = self._counter()
            guess = int(stat.version)

    def raise_to(self, to_epoch: int, progress: Callable[[int], None] | None = None) -> int:
        """Bring the counter up to ``to_epoch`` (the operator's repair after it went back: the
        share shows ``to_epoch`` was served), one versioned write a number, each keeping data
        and version equal as a claim does; the counter's value after. Never lowers it, and
        every number it passes counts as claimed, which can only fence a master, never let
        one stay current. ``progress`` hears each value reached."""
        counter = self._znode("epoch")
        while True:
            latest = self._claims_counter()
            if latest >= to_epoch:
                return latest
            try:
                self._wait(self.client.set_async(counter, str(latest + 1).encode(), latest))
            except BadVersionError:
                continue  # a claim went by: read again
            if progress is not None:
                progress(latest + 1)

    def _claims_counter(self) -> int:
        """The counter's version (a plain read), refusing a counter whose data says otherwise:
        only claims write it, and each leaves data and version equal."""
        data, stat = self._counter()
        latest = int(stat.version)
        if data != str(latest).encode():
            raise OSError(
                errno.EIO,
                f"the epoch counter {self._znode('epoch')} was changed by something other than "
                f"a claim (data {data[:32]!r}, version {latest})",
            )
        return latest

    def _counter(self) -> tuple[bytes, Any]:
        counter = self._znode("epoch")
        try:
            data, stat = self._wait(self.client.get_async(counter))
        except NoNodeError:
            raise OSError(errno.ENOENT, f"the epoch counter {counter} is gone") from None
        return bytes(data), stat
