"""``primacy users add|remove|list FILE``: the STOMP users file (``broker/users.py``).

The password is read from a prompt (twice) on a terminal, or as the first line of
standard input otherwise (``printf '%s\\n' "$PASSWORD" | primacy users add ...``), never
from the command line, where ``ps`` would show it. A running node applies edits to
the next CONNECT; connections already open keep their login.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from pathlib import Path
from typing import Any

from primacy.broker.users import (
    EVERYTHING,
    USER_NAME,
    User,
    UsersFileError,
    check_pattern,
    hash_password,
    load_users,
    save_users,
)
from primacy.cli import codes
from primacy.cli.exits import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, fail

MIN_PASSWORD_LENGTH = 8


def register(subparsers: Any) -> None:
    users = subparsers.add_parser(
        "users",
        help="manage the STOMP users file (stomp_users): logins, passwords, destinations",
        description="Manage the STOMP users file. The password is read from a prompt on a "
        "terminal, or as the first line of standard input otherwise; never from the command "
        "line. A running node applies edits to the next CONNECT.",
    )
    commands = users.add_subparsers(dest="users_command", required=True)
    add = commands.add_parser(
        "add", help="add a user, or change one's password and destinations (created 0600)"
    )
    add.add_argument("file", type=Path, help="the users file")
    add.add_argument("name", help="the login: letters, digits, '.', '_', '@', '-'")
    for verb in ("send", "receive"):
        add.add_argument(
            f"--{verb}",
            action="append",
            metavar="PATTERN",
            help=f"a destination the user may {verb} "
            + ("to" if verb == "send" else "from")
            + ": /queue/NAME, with * for one part and > for the rest (repeat it; default: >, "
            "every queue)",
        )
    add.set_defaults(func=cmd_add)
    remove = commands.add_parser("remove", help="remove a user")
    remove.add_argument("file", type=Path)
    remove.add_argument("name")
    remove.set_defaults(func=cmd_remove)
    listing = commands.add_parser("list", help="list the users and their destinations")
    listing.add_argument("file", type=Path)
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=cmd_list)


def cmd_add(args: argparse.Namespace) -> int:
    if not USER_NAME.fullmatch(args.name):
        return fail(EXIT_USAGE, f"{codes.BAD_USAGE} {args.name!r} is not a user name")
    try:
        send = tuple(check_pattern(p) for p in args.send) if args.send else EVERYTHING
        receive = tuple(check_pattern(p) for p in args.receive) if args.receive else EVERYTHING
    except ValueError as exc:
        return fail(EXIT_USAGE, f"{codes.BAD_USAGE} {exc}")
    users = _existing(args.file)
    if users is None:
        return EXIT_USAGE
    password = _read_password(args.name)
    if password is None:
        return EXIT_USAGE
    users[args.name] = User(args.name, hash_password(password), send, receive)
    save_users(args.file, users)
    print(f"{args.name}: may send to {', '.join(send)}; may receive from {', '.join(receive)}")
    return EXIT_OK


def cmd_remove(args: argparse.Namespace) -> int:
    users = _existing(args.file)
    if users is None:
        return EXIT_USAGE
    if users.pop(args.name, None) is None:
        return fail(EXIT_FAILURE, f"{codes.BAD_USAGE} no user {args.name!r} in {args.file}")
    save_users(args.file, users)
    print(f"{args.name} removed; connections already open keep their login until they end")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    try:
        users = load_users(args.file)
    except UsersFileError as exc:
        return fail(EXIT_USAGE, f"{codes.USERS_FILE_REFUSED} {exc}")
    if args.json:  # never the password hashes
        shown = [{"name": u.name, "send": u.send, "receive": u.receive} for u in users.values()]
        print(json.dumps(shown, indent=2))
        return EXIT_OK
    for user in users.values():
        print(f"{user.name}\tsend: {' '.join(user.send)}\treceive: {' '.join(user.receive)}")
    return EXIT_OK


def _existing(path: Path) -> dict[str, User] | None:
    """The file's users ({} for a file not created yet); None after saying why not."""
    if not path.exists():
        return {}
    try:
        return load_users(path)
    except UsersFileError as exc:
        fail(EXIT_USAGE, f"{codes.USERS_FILE_REFUSED} {exc}")
        return None


def _read_password(name: str) -> str | None:
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {name}: ")
        if getpass.getpass("again: ") != password:
            fail(EXIT_USAGE, f"{codes.BAD_USAGE} the two passwords differ")
            return None
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if len(password) < MIN_PASSWORD_LENGTH:
        fail(
            EXIT_USAGE,
            f"{codes.BAD_USAGE} a password has {MIN_PASSWORD_LENGTH} characters or more",
        )
        return None
    return password
