"""The admin endpoints: the bearer token, and the narrow interface they act through."""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any, Protocol

from primacy.share.secret_file import SecretFileError, read_secret_file

# A token is a line of a few dozen characters.
MAX_TOKEN_FILE_BYTES = 4096


class TokenFileError(Exception):
    """The admin token file is missing, short or not private to its owner; the message says how."""


class AdminRefused(Exception):
    """The node will not do what was asked (not the master, no such node, ...); answered 409."""


class AdminActions(Protocol):
    """Everything the admin endpoints may do to a node."""

    def switchover(self, to: str | None) -> dict[str, Any]: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def set_priority(self, priority: str) -> None: ...


def load_token(path: Path) -> str:
    """Read the admin token; TokenFileError unless ``share/secret_file.py`` finds it private (a
    regular file, root's or ours, nobody else may touch it), then unless it is long enough."""
    try:
        raw = read_secret_file(path, "admin token file", max_bytes=MAX_TOKEN_FILE_BYTES)
        token = raw.decode().strip()
    except SecretFileError as exc:
        raise TokenFileError(str(exc)) from None
    except UnicodeDecodeError:
        raise TokenFileError(f"the admin token file {path} does not hold UTF-8 text") from None
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
