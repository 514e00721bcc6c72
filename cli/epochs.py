"""``primacy epochs raise SHARE [--zookeeper HOSTS]``: bring a group's epoch claims back up to what
the share's journal shows was served (the repair a node refusing to claim asks for).

On ZooKeeper: a counter that went back (reset by a client outside primacy's identity, a
restored backup of the ensemble, a new ``zookeeper_path`` over an old share). On the share
(no ``--zookeeper``): an ``epochs/`` directory deleted or restored apart from the journal,
which holds no claim beside served segments; the journal's newest epoch is recorded as
claimed. Either stops every node from claiming (docs/safety.md, "The epoch floor"). Raising
is safe at any time: every number it passes counts as claimed, which can only fence a
master, never keep one current. Find out first who changed the claims; raising them does
not stop that happening again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from primacy.cli import codes
from primacy.cli.exits import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from primacy.cli.group_records import RecordsUnreadable, add_zookeeper_arguments, group_location
from primacy.share.factory import open_zookeeper
from primacy.share.layout import journal_dir
from primacy.share.posix import PosixShare
from primacy.store.segments import highest_served_epoch


def register(subparsers: Any) -> None:
    epochs = subparsers.add_parser(
        "epochs", help="repair a group's epoch claims from the share's journal"
    )
    commands = epochs.add_subparsers(dest="epochs_command", required=True)
    raise_ = commands.add_parser(
        "raise",
        help="raise the claims to the highest epoch the share's journal shows was served",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    raise_.add_argument("share", type=Path, help="the group's share (its journal is read)")
    add_zookeeper_arguments(raise_, raise_)
    raise_.add_argument(
        "--dry-run", action="store_true", help="say what would change, change nothing"
    )
    raise_.set_defaults(func=run_raise)


def run_raise(args: argparse.Namespace) -> int:
    journal = journal_dir(args.share)
    if not journal.is_dir():
        print(
            f"primacy epochs raise: {codes.SHARE_UNUSABLE} {args.share} is not a share with a "
            f"journal (no directory {journal})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    floor = highest_served_epoch(journal)
    if args.zookeeper is None:
        return _raise_on_the_share(args, floor)
    try:
        location = group_location(args, args.share)
        port = open_zookeeper(location)
        try:
            if not port.group_exists():
                raise RecordsUnreadable(f"no primacy group has used {location.where}")
            if floor == 0 or port.epoch_exists(floor):
                print(f"the counter already covers epoch {floor}, the journal's newest: no change")
                return EXIT_OK
            if args.dry_run:
                print(f"the counter is below epoch {floor}, the journal's newest: would raise it")
                return EXIT_OK
            print(f"raising the epoch counter of {location.where} to {floor}")
            reached = port.raise_counter(floor, _progress(floor))
        finally:
            port.close()
    except (RecordsUnreadable, OSError) as exc:
        print(f"primacy epochs raise: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"the counter is at {reached}: the next claim takes epoch {reached + 1} or later")
    return EXIT_OK


def _raise_on_the_share(args: argparse.Namespace, floor: int) -> int:
    """A group coordinated by its share: record the journal's newest epoch in ``epochs/``."""
    port = PosixShare(args.share, reader=True)  # never opens the lock file
    epochs = port.layout.epochs
    try:
        if floor == 0 or port.epoch_exists(floor):
            print(f"{epochs} already records epoch {floor}, the journal's newest: no change")
            return EXIT_OK
        if args.dry_run:
            print(f"{epochs} has no claim of epoch {floor}, the journal's newest: would record it")
            return EXIT_OK
        reached = port.raise_counter(floor, _progress(floor))
    except OSError as exc:
        print(f"primacy epochs raise: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"{epochs} records epoch {reached}: the next claim takes epoch {reached + 1} or later")
    return EXIT_OK


def _progress(floor: int) -> Any:
    def report(value: int) -> None:
        if value == floor or value % 100 == 0:
            print(f"  counter at {value} of {floor}", flush=True)

    return report
