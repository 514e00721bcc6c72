"""Where the offline commands (``status``, ``cluster``) read a group's records: the share's own
files, or, for a group with ``coordination = "zookeeper"``, its ensemble.

On ZooKeeper the lock, the epochs and the registry are znodes, not files on the share:
reading the share there would show a group that never ran. A reader creates nothing: a path
no group has used is an error, not an empty group. The group's znodes are readable by anyone
(docs/operator-guide.md, "ZooKeeper access"), so a reader needs no credentials, only the TLS
files of an ensemble that speaks TLS; a command that writes (``epochs raise``) needs the
group's credentials file.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from primacy.share.factory import (
    DEFAULT_ZOOKEEPER_PATH,
    GroupLocation,
    GroupUnreadable,
    reading,
)
from primacy.share.port import ShareObserver

RecordsUnreadable = GroupUnreadable  # the group's records cannot be read; the message says why


@dataclass(frozen=True)
class GroupRecords:
    port: ShareObserver  # read-only: the holder is read from outside the lock
    where: str  # for messages: the share, or the ensemble and path
    doctor: str  # the doctor's command line that checks who holds the lock there


def add_zookeeper_arguments(
    parser: argparse.ArgumentParser, source: argparse._ActionsContainer
) -> None:
    """``--zookeeper HOSTS`` (beside ``--share`` in ``source``) and ``--zookeeper-path``."""
    source.add_argument(
        "--zookeeper",
        metavar="HOSTS",
        help='a group with coordination = "zookeeper": its ensemble, e.g. zk1:2181,zk2:2181',
    )
    parser.add_argument(
        "--zookeeper-path",
        default=DEFAULT_ZOOKEEPER_PATH,
        metavar="PATH",
        help=f"with --zookeeper: the group's zookeeper_path (default {DEFAULT_ZOOKEEPER_PATH})",
    )
    for flag, help_text in (
        ("credentials-file", "the group's USER:PASSWORD file (needed only to change znodes)"),
        ("tls-ca-file", "connect over TLS, trusting servers this CA signed"),
        ("tls-cert-file", "the client certificate to present (with --zookeeper-tls-key-file)"),
        ("tls-key-file", "the client certificate's key"),
    ):
        parser.add_argument(
            f"--zookeeper-{flag}", type=Path, metavar="FILE", help=f"with --zookeeper: {help_text}"
        )


def group_location(args: argparse.Namespace, share: Path) -> GroupLocation:
    """Where the arguments say the group's records are: ``share``'s files, or with
    ``--zookeeper`` the ensemble, its path and the access the flags name (RecordsUnreadable
    if those files are missing, not private or malformed)."""
    if args.zookeeper is None:
        return GroupLocation(share)
    cert, key = args.zookeeper_tls_cert_file, args.zookeeper_tls_key_file
    if (cert is None) != (key is None) or (cert is not None and args.zookeeper_tls_ca_file is None):
        raise RecordsUnreadable(
            "--zookeeper-tls-cert-file and --zookeeper-tls-key-file go together, and with "
            "--zookeeper-tls-ca-file"
        )
    try:
        from primacy.share.zookeeper_access import ZooKeeperAccessError, load_access
    except ImportError as exc:  # pragma: no cover - zookeeper_access needs nothing optional
        raise RecordsUnreadable(str(exc)) from exc
    try:
        access = load_access(args.zookeeper_credentials_file, args.zookeeper_tls_ca_file, cert, key)
    except ZooKeeperAccessError as exc:
        raise RecordsUnreadable(str(exc)) from exc
    return GroupLocation(share, args.zookeeper, args.zookeeper_path, access)


@contextmanager
def group_records(args: argparse.Namespace) -> Iterator[GroupRecords]:
    """The records ``--share`` or ``--zookeeper`` names, through a reader's port (built by
    ``share/factory.py``); RecordsUnreadable if there are none."""
    share = getattr(args, "share", None)
    location = group_location(args, Path(share) if share is not None else Path("."))
    if location.zookeeper_hosts is None:
        doctor = f"primacy doctor {location.share}"
    else:
        doctor = f"primacy doctor --zookeeper {location.zookeeper_hosts} SHARE"
    with reading(location) as port:
        yield GroupRecords(port, location.where, doctor)
