"""The STOMP users file: who may connect, with which password, to which destinations.

A JSON object, one entry per user, written by ``primacy users``:

    {"users": {"alice": {"password": "$argon2id$v=19$...",
                         "send": ["/queue/orders.>"], "receive": [">"]}}}

``password`` is an argon2id hash (argon2-cffi's defaults: 64 MiB and three
passes, so a stolen file cannot be guessed at line rate either), never the
password. ``send`` and ``receive`` are destination patterns with ActiveMQ's
wildcards over the name's ``.``-separated parts: ``*`` matches one part, ``>``
one or more to the end (``>`` alone: every queue); the ``/queue/`` prefix may
be left out. The file is refused unless it is a regular file owned by root or
by the node's user that nobody else can write (``share/secret_file.py``).
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import argon2

from primacy.broker.frame_rules import QUEUE_PREFIX
from primacy.share.secret_file import SecretFileError, check_secret_file, read_secret_file

USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}", re.ASCII)
EVERYTHING = (">",)
MAX_USERS_FILE_BYTES = 4 * 1024 * 1024
WHAT = "users file"
_PASSWORDS = argon2.PasswordHasher()


class UsersFileError(Exception):
    """The users file cannot be used: unreadable, writable by others, or not of our shape."""


@dataclass(frozen=True)
class User:
    name: str
    password_hash: str
    send: tuple[str, ...] = EVERYTHING
    receive: tuple[str, ...] = EVERYTHING

    def may_send(self, destination: str) -> bool:
        return any(destination_matches(pattern, destination) for pattern in self.send)

    def may_receive(self, destination: str) -> bool:
        return any(destination_matches(pattern, destination) for pattern in self.receive)

    def as_json(self) -> dict[str, Any]:
        return {
            "password": self.password_hash,
            "send": list(self.send),
            "receive": list(self.receive),
        }


def destination_matches(pattern: str, destination: str) -> bool:
    """ActiveMQ's wildcards: ``*`` one ``.``-separated part, ``>`` one or more to the end."""
    wanted = pattern.removeprefix(QUEUE_PREFIX).split(".")
    parts = destination.removeprefix(QUEUE_PREFIX).split(".")
    for index, element in enumerate(wanted):
        if element == ">":
            return index == len(wanted) - 1 and len(parts) > index
        if index >= len(parts) or (element != "*" and element != parts[index]):
            return False
    return len(parts) == len(wanted)


def check_pattern(pattern: str) -> str:
    """``pattern`` if it is one; ValueError naming what is wrong otherwise."""
    name = pattern.removeprefix(QUEUE_PREFIX)
    parts = name.split(".")
    if not name or any(not part for part in parts) or ">" in parts[:-1]:
        raise ValueError(f"{pattern!r} is not a destination pattern (e.g. /queue/orders.>)")
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in name):
        raise ValueError(f"{pattern!r} holds a space or a control character")
    return pattern


def hash_password(password: str) -> str:
    return _PASSWORDS.hash(password)


def password_matches(password_hash: str, password: str) -> bool:
    """Slow on purpose (argon2id): call it off any loop that must stay responsive."""
    try:
        return _PASSWORDS.verify(password_hash, password)
    except argon2.exceptions.VerificationError:
        return False
    except argon2.exceptions.InvalidHashError:
        return False


@functools.cache
def unknown_user_hash() -> str:
    """Checked against when a login names no user, so an unknown user costs as long as a
    wrong password and the answer's timing does not tell which names exist. Made on first
    use, not at import: one argon2 hash is a quarter of a second of CPU that every
    ``primacy`` command would otherwise pay."""
    return hash_password("no user has this password")


def check_ownership(path: Path) -> os.stat_result:
    """The file's status; UsersFileError unless ``share/secret_file.py`` passes it: a regular
    file, root's or the node's user's, that nobody but its owner can write."""
    try:
        return check_secret_file(path, WHAT, private=False)
    except SecretFileError as exc:
        raise UsersFileError(str(exc)) from None


def load_users(path: Path) -> dict[str, User]:
    """Every user of the file; UsersFileError saying what is wrong.

    Checked and read through one descriptor: the bytes parsed are those of the file checked.
    """
    try:
        raw = read_secret_file(path, WHAT, max_bytes=MAX_USERS_FILE_BYTES, private=False)
    except SecretFileError as exc:
        raise UsersFileError(str(exc)) from None
    try:
        data = json.loads(raw.decode())
        users = {}
        for name, entry in data["users"].items():
            if not USER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a user name")
            if not isinstance(entry["password"], str) or not entry["password"].startswith(
                "$argon2id$"
            ):
                raise ValueError(f"user {name!r} has no argon2id password hash")
            send = tuple(check_pattern(p) for p in entry.get("send", EVERYTHING))
            receive = tuple(check_pattern(p) for p in entry.get("receive", EVERYTHING))
            users[name] = User(name, entry["password"], send, receive)
        return users
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise UsersFileError(f"the users file {path} is not of the expected shape: {exc}") from None


def save_users(path: Path, users: dict[str, User]) -> None:
    """Write the file (mode 0600) through a temporary name: readers see old or new, whole."""
    content = {"users": {name: user.as_json() for name, user in sorted(users.items())}}
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", opener=lambda p, flags: os.open(p, flags, 0o600)) as handle:
        json.dump(content, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)
