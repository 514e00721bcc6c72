"""The ``primacy doctor`` command (and ``primacy systemd``, from systemd_units): argument glue.

``register(subparsers)`` adds both commands to the ``primacy`` parser; each
parser's ``func(args) -> int`` runs it and returns the exit code. The checks
live in ``nfs_profiles``; this module hands them the real lock probe.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from primacy.cli.systemd_units import register as register_systemd_commands
from primacy.locker.probe import check_share
from primacy.nfs_profiles.doctor import diagnose, render_text
from primacy.nfs_profiles.findings import Finding
from primacy.nfs_profiles.fstab import MountSpecError, fstab_line, mount_unit, mount_unit_name
from primacy.nfs_profiles.mountinfo import MOUNTINFO_PATH
from primacy.nfs_profiles.profiles import PROFILE_NAMES, load_profile
from primacy.share.layout import ShareLayout
from primacy.share.posix_lock import LockMethod, held_by_another


def lock_probe(share: Path, lock_method: str) -> None:
    """The doctor's lock round trip: ``locker.probe.check_share`` with the profile's method."""
    check_share(share, LockMethod(lock_method))


def lock_held(share: Path, lock_method: str) -> bool | None:
    """Whether someone holds the share's own lock, tried once with the profile's method."""
    return held_by_another(ShareLayout(share).lock_file, LockMethod(lock_method))


def register(subparsers: Any) -> None:
    """Add ``doctor`` and ``systemd`` to the ``primacy`` command's subparsers."""
    doctor = subparsers.add_parser(
        "doctor",
        help="check a share's filesystem and mount options against its profile",
        description=(
            "Check PATH as a primacy share: its filesystem and mount options, a lock and "
            "an fsync round trip. Exit 0 fine, 1 warnings, 2 refused. With --fstab, print "
            "the fstab line and systemd .mount unit for a profile instead."
        ),
    )
    doctor.add_argument("path", nargs="?", type=Path, help="the share directory to check")
    doctor.add_argument("--json", action="store_true", help="print JSON for tooling")
    doctor.add_argument(
        "--fstab",
        nargs=2,
        metavar=("SOURCE", "MOUNTPOINT"),
        help="print mount configuration for SOURCE (e.g. nas1:/export/primacy) on MOUNTPOINT",
    )
    doctor.add_argument(
        "--profile", choices=PROFILE_NAMES, help="the profile for --fstab (default nfs4)"
    )
    doctor.add_argument(
        "--no-round-trips", action="store_true", help="check the mount table only, touch nothing"
    )
    doctor.add_argument(
        "--user",
        metavar="NAME",
        help="the user the nodes run as, to check every file and directory on the share "
        "against (default: the user running the doctor; as root, the share's owner)",
    )
    doctor.add_argument(
        "--zookeeper",
        metavar="HOSTS",
        help="also check this ZooKeeper ensemble (coordination = zookeeper): each server "
        "serving in a quorum, and the session timeout it grants against the keepalive",
    )
    doctor.add_argument(
        "--zookeeper-path",
        default="/primacy",
        metavar="PATH",
        help="with --zookeeper: the group's zookeeper_path, whose znodes' ACLs are checked",
    )
    for flag, help_text in (
        (
            "credentials-file",
            "the nodes' zookeeper_credentials_file (checked: private, USER:PASSWORD)",
        ),
        ("tls-ca-file", "the nodes' zookeeper_tls_ca_file: check the ensemble over TLS"),
        ("tls-cert-file", "the nodes' zookeeper_tls_cert_file"),
        ("tls-key-file", "the nodes' zookeeper_tls_key_file"),
    ):
        doctor.add_argument(
            f"--zookeeper-{flag}", type=Path, metavar="FILE", help=f"with --zookeeper: {help_text}"
        )
    doctor.add_argument(
        "--zookeeper-session-timeout-ms",
        type=int,
        metavar="MS",
        help="the session timeout the nodes ask for (default: the config key's)",
    )
    doctor.add_argument(
        "--lock-keep-alive-period-ms",
        type=int,
        metavar="MS",
        help="the nodes' keepalive period (default: the config key's)",
    )
    doctor.add_argument("--mountinfo", type=Path, default=MOUNTINFO_PATH, help=argparse.SUPPRESS)
    doctor.set_defaults(func=run_doctor)

    register_systemd_commands(subparsers)


def run_doctor(args: argparse.Namespace) -> int:
    if args.fstab is not None:
        if args.path is not None:
            return _usage_error("give either PATH or --fstab SOURCE MOUNTPOINT, not both")
        return _print_fstab(args.fstab[0], args.fstab[1], args.profile or "nfs4", args.json)
    if args.path is None:
        return _usage_error("give the share directory to check: primacy doctor PATH")
    if args.profile is not None:
        return _usage_error(
            "--profile applies to --fstab; PATH is checked against its own filesystem"
        )
    round_trips = not args.no_round_trips
    diagnosis = diagnose(
        args.path,
        lock_probe=lock_probe if round_trips else None,
        lock_held=lock_held if round_trips else None,
        fsync_round_trip=round_trips,
        mountinfo_path=args.mountinfo,
        owners=True,
        service_user=args.user,
    )
    if args.zookeeper is not None:
        diagnosis = replace(diagnosis, findings=diagnosis.findings + _ensemble_findings(args))
    if args.json:
        print(json.dumps(diagnosis.to_dict(), indent=2))
    else:
        print(render_text(diagnosis), end="")
    return diagnosis.exit_code


def _ensemble_findings(args: argparse.Namespace) -> tuple[Finding, ...]:
    """``--zookeeper``: the ensemble's findings, with the config keys' defaults where no flag
    says (imported here: the other commands need neither the config's nor kazoo's modules)."""
    from primacy.nfs_profiles.ensemble import check_access, check_ensemble
    from primacy.supervisor.config import NodeConfig
    from primacy.supervisor.machine.role_events import TAKEOVER_DRIFT_MARGIN

    fields = NodeConfig.model_fields
    session_ms = args.zookeeper_session_timeout_ms or fields["zookeeper_session_timeout_ms"].default
    keep_alive_ms = args.lock_keep_alive_period_ms or fields["lock_keep_alive_period_ms"].default
    tls_files = (
        args.zookeeper_tls_ca_file,
        args.zookeeper_tls_cert_file,
        args.zookeeper_tls_key_file,
    )
    access_findings, access = check_access(
        args.zookeeper, args.zookeeper_path, args.zookeeper_credentials_file, tls_files
    )
    if access is None:  # a file is unusable: the ensemble cannot be reached as the nodes do
        return access_findings
    return access_findings + check_ensemble(
        args.zookeeper,
        session_ms / 1000,
        keep_alive_ms / 1000,
        TAKEOVER_DRIFT_MARGIN,
        access=access,
    )


def _print_fstab(source: str, mount_point: str, profile_name: str, as_json: bool) -> int:
    profile = load_profile(profile_name)
    try:
        line = fstab_line(profile, source, mount_point)
        unit = mount_unit(profile, source, mount_point)
    except MountSpecError as exc:
        return _usage_error(str(exc))
    unit_name = mount_unit_name(mount_point)
    if as_json:
        print(
            json.dumps(
                {
                    "profile": profile.name,
                    "fstab": line,
                    "mount_unit_name": unit_name,
                    "mount_unit": unit,
                },
                indent=2,
            )
        )
        return 0
    print(f"# /etc/fstab line ({profile.name} profile); or use the .mount unit below, not both")
    print(line)
    print()
    print(unit, end="")
    return 0


def _usage_error(message: str) -> int:
    print(f"primacy doctor: {message}", file=sys.stderr)
    return 64


def main(argv: list[str] | None = None) -> int:
    """``python -m cli.doctor doctor PATH``: the commands without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="primacy")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
