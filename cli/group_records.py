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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from primacy.share.port import SharePort
from primacy.share.posix import PosixShare
from primacy.share.posix_lock import read_holder_from_outside
from primacy.share.records import HolderInfo

# What a reader waits for the ensemble: it is a person at a terminal, not a lease check.
_ZOOKEEPER_WAIT_S = 5.0
DEFAULT_ZOOKEEPER_PATH = "/primacy"  # the zookeeper_path key's default


class RecordsUnreadable(Exception):
    """The group's records cannot be read; the message says where and why."""


@dataclass(frozen=True)
class GroupRecords:
    port: SharePort
    read_holder: Callable[[], HolderInfo | None]  # who holds the lock, read from outside it
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


@contextmanager
def group_records(args: argparse.Namespace) -> Iterator[GroupRecords]:
    """The records ``--share`` or ``--zookeeper`` names; RecordsUnreadable if there are none."""
    if args.zookeeper is None:
        share: Path = args.share
        if not share.is_dir():
            raise RecordsUnreadable(f"the share {share} does not exist or is not a directory")
        port = PosixShare(share)

        def holder() -> HolderInfo | None:
            return read_holder_from_outside(port.layout.lock_file)

        yield GroupRecords(port, holder, str(share), f"primacy doctor {share}")
        return
    try:
        from primacy.share.zookeeper import ZooKeeperShare
        from primacy.share.zookeeper_access import ZooKeeperAccessError, load_access
    except ImportError as exc:  # kazoo is the zookeeper extra's
        raise RecordsUnreadable(
            f"reading a ZooKeeper group needs kazoo (pip install 'primacy[zookeeper]'): {exc}"
        ) from exc
    where = f"{args.zookeeper_path} on {args.zookeeper}"
    cert, key = args.zookeeper_tls_cert_file, args.zookeeper_tls_key_file
    if (cert is None) != (key is None) or (cert is not None and args.zookeeper_tls_ca_file is None):
        raise RecordsUnreadable(
            "--zookeeper-tls-cert-file and --zookeeper-tls-key-file go together, and with "
            "--zookeeper-tls-ca-file"
        )
    try:
        access = load_access(args.zookeeper_credentials_file, args.zookeeper_tls_ca_file, cert, key)
    except ZooKeeperAccessError as exc:
        raise RecordsUnreadable(str(exc)) from exc
    zookeeper = ZooKeeperShare(
        args.zookeeper,
        args.zookeeper_path,
        session_timeout_s=_ZOOKEEPER_WAIT_S,
        request_timeout_s=_ZOOKEEPER_WAIT_S,
        access=access,
        secure_group=False,  # a command leaves the group's ACLs to its nodes
    )
    try:
        deadline = time.monotonic() + _ZOOKEEPER_WAIT_S
        while zookeeper.session_state != "connected" and time.monotonic() < deadline:
            time.sleep(0.05)  # kazoo connects on its own thread; requests need the session
        try:
            used = zookeeper.group_exists()
        except OSError as exc:
            raise RecordsUnreadable(
                f"the ensemble {args.zookeeper} does not answer: {exc}"
            ) from exc
        if not used:
            raise RecordsUnreadable(f"no primacy group has used {where}")
        doctor = f"primacy doctor --zookeeper {args.zookeeper} SHARE"
        yield GroupRecords(zookeeper, zookeeper.read_holder, where, doctor)
    finally:
        zookeeper.close()
