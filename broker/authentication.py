"""Checking a CONNECT's login and passcode against the users file, without stalling the broker.

argon2id is slow on purpose (tens of milliseconds and 64 MiB a check), so checks
run on one thread of their own, never on the broker's event loop; the
users file is re-read there too when it changed (its size, time or inode), so
edits apply to the next CONNECT without a restart. A file that became unusable
(writable by others, not JSON) keeps the users last read, and says why.

Failed logins are slowed down per source address: each answers after a delay
that doubles with the source's recent failures (``FIRST_DELAY_S`` up to
``MAX_DELAY_S``), so a password cannot be guessed at line rate, and a success
forgets the source's failures. An unknown user and a wrong password get the
same answer after the same work, so names cannot be probed either.

Logins being checked or waiting for their turn hold a slot of the broker's login budget
(``admission.py``): ``MAX_LOGINS_IN_PROGRESS`` in all and ``MAX_LOGINS_PER_NETWORK`` from one
network, so one host's queued logins cannot refuse everyone else's. A login past them is
refused with its own code (``LOGINS_BUSY``: busy, try again), never the wrong-password one, and
a client that hangs up gives its slot back at once, not at its turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from primacy.broker import codes
from primacy.broker.admission import Budget
from primacy.broker.frames import Frame
from primacy.broker.refusals import Refused
from primacy.broker.users import (
    User,
    UsersFileError,
    check_ownership,
    load_users,
    password_matches,
    unknown_user_hash,
)

if TYPE_CHECKING:
    from primacy.broker.counters import Counters

log = logging.getLogger("primacy.broker")

CHECK_THREADS = 1  # a flood of logins costs one core at most, never the lease checks
# Logins being checked or waiting for their turn; past either, refused at once (LOGINS_BUSY).
# A quarter from one network: a host needs four networks to hold them all (docs/safety.md).
MAX_LOGINS_IN_PROGRESS = 32
MAX_LOGINS_PER_NETWORK = 8
FIRST_DELAY_S = 0.25
MAX_DELAY_S = 8.0
# Sources remembered at most (least recently failed forgotten first): bounded memory.
MAX_SOURCES = 10_000


@dataclass(frozen=True)
class LoginRefused:
    """Why a login failed: for the log and the metrics, never for the client."""

    login: str | None
    reason: str  # "no login", "unknown user", "wrong password"


class Authenticator:
    def __init__(self, users_file: Path) -> None:
        self.users_file = users_file
        self._lock = threading.Lock()
        self._users = load_users(users_file)  # at start, an unusable file is a failed start
        self._seen = _file_identity(check_ownership(users_file))
        self._pool = ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="primacy-auth")
        self._unknown_user_hash = unknown_user_hash()  # now, so the first login costs no more

    def check(self, login: str | None, passcode: str | None) -> Future[User | LoginRefused]:
        """The user, or why not; completes on a pool thread."""
        return self._pool.submit(self._check, login, passcode)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _check(self, login: str | None, passcode: str | None) -> User | LoginRefused:
        users = self._current_users()
        user = users.get(login) if login is not None else None
        matches = password_matches(
            user.password_hash if user is not None else self._unknown_user_hash, passcode or ""
        )
        if login is None or passcode is None:
            return LoginRefused(login, "no login")
        if user is None:
            return LoginRefused(login, "unknown user")
        return user if matches else LoginRefused(login, "wrong password")

    def _current_users(self) -> dict[str, User]:
        with self._lock:
            try:
                identity = _file_identity(check_ownership(self.users_file))
                if identity != self._seen:
                    self._users = load_users(self.users_file)
                    self._seen = identity
                    log.info(
                        "%s: %s: %d users",
                        codes.title(codes.USERS_RELOADED),
                        self.users_file,
                        len(self._users),
                    )
            except UsersFileError as error:
                log.error(
                    "%s: %s; the users read before stay",
                    codes.title(codes.USERS_FILE_REFUSED),
                    error,
                )
            return self._users


class LoginThrottle:
    """Per source address, when its next login may be checked (the broker's event loop's).

    A source with no recent failure is checked at once. After a failure, each
    next login of that source waits its turn, one at a time, spaced by a delay
    that doubles with every failure; a success forgets the source.
    """

    def __init__(self) -> None:
        self._sources: OrderedDict[str, tuple[int, float]] = OrderedDict()

    def reserve(self, source: str, now: float) -> float:
        """When this source's login may be checked; the turn is taken."""
        failures, free_at = self._sources.pop(source, (0, now))
        at = max(now, free_at)
        self._remember(source, failures, at + _delay_s(failures))
        return at

    def failed(self, source: str, now: float) -> None:
        failures, free_at = self._sources.pop(source, (0, now))
        self._remember(source, failures + 1, max(free_at, now + _delay_s(failures + 1)))

    def succeeded(self, source: str) -> None:
        self._sources.pop(source, None)

    def _remember(self, source: str, failures: int, free_at: float) -> None:
        self._sources[source] = (failures, free_at)
        while len(self._sources) > MAX_SOURCES:
            self._sources.popitem(last=False)  # the least recently seen source


def _delay_s(failures: int) -> float:
    return min(MAX_DELAY_S, FIRST_DELAY_S * 2 ** (failures - 1)) if failures else 0.0


def _file_identity(info: os.stat_result) -> tuple[int, int, int, int]:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class PendingLogin(Exception):
    """The CONNECT waits for its login check; its connection holds it and what follows."""


class Login:
    """One connection's login: checked once, off the event loop, in its source's turn."""

    def __init__(
        self,
        authenticator: Authenticator,
        throttle: LoginThrottle,
        budget: Budget[Login],
        loop: asyncio.AbstractEventLoop,
        source: str,
        on_checked: Callable[[], None],
    ) -> None:
        self.authenticator = authenticator
        self.throttle = throttle
        self.budget = budget
        self.loop = loop
        self.source = source
        self.on_checked = on_checked
        self._outcome: User | LoginRefused | None = None
        self._started = False
        self._cancelled = False
        self._turn: asyncio.TimerHandle | None = None
        self._check: Future[User | LoginRefused] | None = None

    def outcome(self, login: str | None, passcode: str | None) -> User | LoginRefused:
        """The checked outcome; PendingLogin (after starting the check) until there is one;
        Refused (LOGINS_BUSY) when the login budget has no room for it."""
        if self._outcome is None and not self._started:
            self._started = True
            verdict = self.budget.take(self.source, self, waiting=False)
            if not verdict.admitted:
                self._busy(login, verdict.refused_by)
            at = self.throttle.reserve(self.source, self.loop.time())
            self._turn = self.loop.call_at(at, self._submit, login, passcode)
        if self._outcome is None:
            raise PendingLogin
        return self._outcome

    def user(self, frame: Frame, counters: Counters, session: str) -> User:
        """The user the CONNECT ``frame`` logs in as; Refused, one answer for every cause."""
        outcome = self.outcome(frame.get("login"), frame.get("passcode"))
        if isinstance(outcome, User):
            counters.logins_ok += 1
            return outcome
        counters.logins_failed += 1
        log.warning(  # never the passcode
            "%s: session %s from %s: login %r refused: %s",
            codes.title(codes.LOGIN_FAILED),
            session,
            self.source,
            (outcome.login or "")[:100],
            outcome.reason,
        )
        raise Refused(codes.LOGIN_FAILED, "login failed: check the login and passcode")

    def cancel(self) -> None:
        """The client went away: its slot is free at once, its check dropped if not begun."""
        self._cancelled = True
        if self._turn is not None:
            self._turn.cancel()
        if self._check is not None:
            self._check.cancel()  # a check already running completes, and is then ignored
        if self._check is None or self._check.cancelled():
            self.budget.release(self)

    def _busy(self, login: str | None, refused_by: str) -> None:
        where = (
            f"from the network of {self.source} (at most {self.budget.per_network})"
            if refused_by == "network"
            else f"(at most {self.budget.total})"
        )
        log.warning(
            "%s: login %r from %s refused: too many logins in progress %s",
            codes.title(codes.LOGINS_BUSY),
            (login or "")[:100],
            self.source,
            where,
        )
        raise Refused(
            codes.LOGINS_BUSY,
            f"too many logins are in progress {where}; nothing was checked: try again shortly",
        )

    def _submit(self, login: str | None, passcode: str | None) -> None:
        self._turn = None
        if self._cancelled:
            return
        checked = self.authenticator.check(login, passcode)
        self._check = checked
        checked.add_done_callback(lambda done: self._hand_back(done, login))

    def _hand_back(self, done: Future[User | LoginRefused], login: str | None) -> None:
        """On the check's thread: back to the loop (gone if the broker stopped)."""
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._checked, done, login)

    def _checked(self, done: Future[User | LoginRefused], login: str | None) -> None:
        self.budget.release(self)
        if self._cancelled and done.cancelled():
            return  # its client went away before the check began: nothing was checked
        try:
            outcome = done.result()
        except Exception as error:  # a failed check (cancelled at shutdown, say) refuses
            outcome = LoginRefused(login, f"the check failed: {error!r}")
        if isinstance(outcome, LoginRefused):
            self.throttle.failed(self.source, self.loop.time())
        else:
            self.throttle.succeeded(self.source)
        self._outcome = outcome
        if not self._cancelled:
            self.on_checked()


def authorize(user: User, what: str, destination: str, counters: Counters) -> None:
    """Refused unless ``user`` may ``what`` ("send to", "receive from") ``destination``."""
    allowed = user.may_send if what == "send to" else user.may_receive
    if not allowed(destination):
        counters.unauthorized += 1
        raise Refused(
            codes.NOT_AUTHORIZED,
            f"user {user.name!r} may not {what} {destination[:200]}; nothing was stored",
        )
