"""`primacy forget NODE`: remove a node stopped for good from the group's registry."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from primacy.cli import codes
from primacy.cli.exits import EXIT_FAILURE, EXIT_OK, EXIT_SHARE_UNUSABLE, fail
from primacy.cli.group_records import RecordsUnreadable, add_zookeeper_arguments, group_location
from primacy.cli.terminal import printable
from primacy.share.factory import open_port, open_zookeeper, reading
from primacy.share.port import SharePort

FORGET_EXIT_CODES = """exit codes:
  0  every NODE named is gone from the registry
  1  a NODE is live (it would write its entry again) or not in the registry: nothing removed
  3  the share (or the ZooKeeper ensemble) cannot be read
  64 bad command line
"""


def register(subparsers: Any) -> None:
    forget = subparsers.add_parser(
        "forget",
        help="remove stopped nodes from the group's registry",
        description="Remove the registry entries of nodes stopped for good (decommissioned, "
        "renamed), which `status` and `cluster` otherwise list for ever as last seen long "
        "ago. A live node is refused: it would write its entry again at its next refresh.",
        epilog=FORGET_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    forget.add_argument("node", nargs="+", metavar="NODE", help="the node_id to forget")
    source = forget.add_mutually_exclusive_group(required=True)
    source.add_argument("--share", type=Path, help="the shared data directory")
    add_zookeeper_arguments(forget, source)
    forget.add_argument("--json", action="store_true", help="print JSON")
    forget.set_defaults(func=cmd_forget)


def cmd_forget(args: argparse.Namespace) -> int:
    try:
        location = group_location(args, Path(args.share) if args.share else Path("."))
        with reading(location) as records:  # refuses a share or path no group has used
            now = time.time()
            entries = {entry.node_id: entry for entry in records.node_entries()}
    except RecordsUnreadable as exc:
        return fail(EXIT_SHARE_UNUSABLE, f"{codes.SHARE_UNUSABLE} {exc}")
    missing = [node for node in args.node if node not in entries]
    live = [node for node in args.node if node in entries and entries[node].is_live(now)]
    if missing or live:
        problems = [f"{printable(node)} is not in the registry" for node in missing] + [
            f"{printable(node)} is live (its entry is refreshed): stop it first" for node in live
        ]
        return fail(EXIT_FAILURE, f"{'; '.join(problems)}; nothing forgotten")
    # A reader's handle writes nothing: removing takes the handle a node has (on ZooKeeper,
    # with the group's credentials when its znodes carry an ACL).
    port: SharePort = (
        open_port(location) if location.zookeeper_hosts is None else open_zookeeper(location)
    )
    try:
        for node in args.node:
            port.forget_node(node)
    except OSError as exc:
        return fail(EXIT_FAILURE, f"cannot remove a registry entry in {location.where}: {exc}")
    finally:
        port.close()
    forgotten = [entries[node] for node in args.node]
    if args.json:
        print(json.dumps({"forgotten": [vars(entry) for entry in forgotten]}, indent=2))
        return EXIT_OK
    for entry in forgotten:
        try:
            last = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.updated_unix_s))
        except (TypeError, ValueError, OverflowError, OSError):  # the share's text, untrusted
            last = "at no time a clock shows"
        print(
            f"forgot {printable(entry.node_id)} ({printable(entry.role)}, last seen {last}, "
            f"http {printable(entry.http)})"
        )
    return EXIT_OK
