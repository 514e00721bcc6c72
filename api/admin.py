"""The admin endpoints: the bearer token, and the narrow interface they act through."""

from __future__ import annotations

import hmac
import os
import stat
from pathlib import Path
from typing import Any, Protocol


class TokenFileError(Exception):
    """The admin token file is missing, empty or readable by others; the message says the fix."""


class AdminRefused(Exception):
    """The node will not do what was asked (not the master, no such node, ...); answered 409."""


class AdminActions(Protocol):
    """Everything the admin endpoints may do to a node."""

    def switchover(self, to: str | None) -> dict[str, Any]: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def set_priority(self, priority: str) -> None: ...


def load_token(path: Path) -> str:
    """Read the admin token; refuse a file that anyone but its owner (root or us) could read."""
    try:
        info = os.stat(path)
        token = Path(path).read_text().strip()
    except FileNotFoundError:
        raise TokenFileError(f"the admin token file {path} does not exist") from None
    except OSError as exc:
        raise TokenFileError(f"cannot read the admin token file {path}: {exc.strerror}") from exc
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenFileError(
            f"the admin token file {path} has mode {stat.S_IMODE(info.st_mode):04o}, readable by "
            f"others: run 'chmod 600 {path}'"
        )
    if info.st_uid not in (0, os.geteuid()):
        raise TokenFileError(f"the admin token file {path} must belong to root or to this user")
    if len(token) < 16:
        raise TokenFileError(f"the admin token in {path} is shorter than 16 characters")
    return token


def token_matches(expected: str, authorization: str | None) -> bool | None:
    """None without a bearer token (401), else whether it matches, in constant time (403 if not)."""
    if not authorization:
        return None
    scheme, _, supplied = authorization.partition(" ")
    if scheme.lower() != "bearer" or not supplied.strip():
        return None
    return hmac.compare_digest(supplied.strip().encode(), expected.encode())
