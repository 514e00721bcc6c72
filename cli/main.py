"""The ``primacy`` command line: run a node, ask who is master, try a demo group."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from primacy.api.admin import TokenFileError, load_token
from primacy.api.server import ApiServerError
from primacy.api.snapshot import ShareCheck, ShareFinding
from primacy.cli.admin import register as register_admin_commands
from primacy.cli.doctor import register as register_doctor_commands
from primacy.cli.journal import register as register_journal_commands
from primacy.cli.messaging import register as register_messaging_commands
from primacy.cli.replay import register as register_replay_commands
from primacy.locker.epoch import EpochRegistry
from primacy.locker.lockfile import read_holder_from_outside
from primacy.locker.probe import ShareUnusable, check_share
from primacy.nfs_profiles import codes as share_codes
from primacy.nfs_profiles.doctor import Diagnosis, check_for_run
from primacy.supervisor.config import (
    DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL_MS,
    DEFAULT_LOCK_KEEP_ALIVE_PERIOD_MS,
    STORE_DEFAULTS,
    ConfigError,
    load_config,
)
from primacy.supervisor.registry import NodeRegistry

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SHARE_UNUSABLE = 3
EXIT_CANNOT_LISTEN = 4

EXIT_CODES_HELP = """exit codes:
  0  stopped normally
  1  unexpected failure (see the log)
  2  bad command line or configuration
  3  the share is unusable (missing, not writable, locks do not work)
  4  the HTTP address cannot be listened on
"""


def _run_parser(subparsers: Any) -> None:
    run = subparsers.add_parser(
        "run",
        help="run this node's supervisor",
        description="Run a primacy supervisor: take the share's lock when it is free and serve as "
        "master, or wait as a slave. Every option can also be set in the --config TOML "
        "file (key = option name with underscores); options given here win.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--config", type=Path, help="TOML config file")
    run.add_argument("--node-id", help="this node's name, unique in the group")
    run.add_argument("--share", type=Path, help="the shared data directory")
    run.add_argument("--http", help="HOST:PORT of the status endpoint (default 127.0.0.1:8008)")
    run.add_argument(
        "--stomp",
        metavar="HOST:PORT",
        help="serve the built-in STOMP broker here while master (off unless given)",
    )
    run.add_argument(
        "--lock-acquire-sleep-interval-ms",
        "--lock-acquire-sleep-interval",
        type=int,
        metavar="MS",
        dest="lock_acquire_sleep_interval_ms",
        help=f"how often a slave tries the lock (default {DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL_MS})",
    )
    run.add_argument(
        "--lock-keep-alive-period-ms",
        "--lock-keep-alive-period",
        type=int,
        metavar="MS",
        dest="lock_keep_alive_period_ms",
        help="a master's claim lasts this long after each lease check; it checks twice "
        f"per period (default {DEFAULT_LOCK_KEEP_ALIVE_PERIOD_MS})",
    )
    run.add_argument(
        "--takeover-delay-ms",
        type=int,
        metavar="MS",
        help="wait after claiming the epoch before serving; at least the keepalive "
        "period (default: keepalive period + 10%%)",
    )
    run.add_argument(
        "--priority",
        choices=["never", "normal", "high", "highest"],
        help="never: never master; lower priorities wait longer for a free lock",
    )
    run.add_argument(
        "--lock-method", choices=["flock", "posix"], help="lock primitive (default flock)"
    )
    run.add_argument(
        "--exec-stop-grace-ms",
        type=int,
        metavar="MS",
        help="SIGTERM to SIGKILL grace for the exec child (default 5000)",
    )
    run.add_argument(
        "--exec-max-restarts",
        type=int,
        metavar="N",
        help="a child that exits more than N times within --exec-restart-window-s makes the "
        "node give the lock up so another node can try (default 3)",
    )
    run.add_argument(
        "--exec-restart-window-s",
        type=float,
        metavar="S",
        help="the window in which the exec child's exits are counted (default 60)",
    )
    run.add_argument(
        "--crash-loop-hold-off-ms",
        type=int,
        metavar="MS",
        help="after giving the lock up for a crash-looping child or a journal that failed to "
        "open, wait this long before trying the lock again (default 10000)",
    )
    run.add_argument(
        "--registry-refresh-ms",
        type=int,
        metavar="MS",
        help="how often this node publishes itself in the share's nodes/ registry and reads "
        "the others (default 1000)",
    )
    run.add_argument(
        "--segment-max-bytes",
        type=int,
        metavar="BYTES",
        help="start a new journal segment when the next batch would take the current one past "
        f"this size (default {STORE_DEFAULTS.segment_max_bytes}, 64 MiB; at least 4096)",
    )
    run.add_argument(
        "--max-message-size",
        type=int,
        metavar="BYTES",
        help="refuse a message whose journal record (about 40 bytes + destination + id + headers "
        f"+ body) is larger (default {STORE_DEFAULTS.max_message_size}, 5 MiB)",
    )
    run.add_argument(
        "--retention-max-age-s",
        metavar="S|none",
        help="delete sealed journal segments older than this once nothing in them is pending "
        f"(default {STORE_DEFAULTS.retention_max_age_s:.0f}, 7 days; none: no age limit)",
    )
    run.add_argument(
        "--retention-max-bytes",
        metavar="BYTES|none",
        help="delete the oldest sealed journal segments while the journal is larger, never one "
        "still holding a pending message (default none: no size limit)",
    )
    run.add_argument(
        "--dedupe-window-messages",
        type=int,
        metavar="N",
        help="a resend is dropped if its (destination, message id) is among the last N the "
        f"journal accepted (default {STORE_DEFAULTS.dedupe_window_messages})",
    )
    run.add_argument(
        "--sync-policy",
        choices=["sync", "write_no_sync", "no_sync"],
        help="when a journal write is acknowledged: sync (after fdatasync and the fencing check; "
        "the default), write_no_sync, no_sync (see docs/journal-format.md for what each survives)",
    )
    run.add_argument(
        "--admin-token-file",
        type=Path,
        metavar="FILE",
        help="enables the admin endpoints (switchover, pause, resume, priority); the file holds "
        "the bearer token and must not be readable by group or others",
    )
    run.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    run.add_argument(
        "--force-unsupported-share",
        action="store_true",
        default=None,
        help="start even on a share `primacy doctor` refuses (logged loudly; you own the risk)",
    )
    run.add_argument(
        "--exec",
        dest="exec_marker",
        action="store_true",
        help="everything after --exec (and an optional --) is the command to run as "
        "the master's child",
    )
    run.set_defaults(func=cmd_run)


def _split_exec(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """Split ``... --exec -- CMD ARGS`` into primacy's own arguments and the command."""
    if "--exec" not in argv:
        return argv, None
    at = argv.index("--exec")
    command = argv[at + 1 :]
    if command[:1] == ["--"]:
        command = command[1:]
    return argv[: at + 1], command


def cmd_run(args: argparse.Namespace) -> int:
    from primacy.supervisor.node import Node  # keeps `primacy status` fast: no FastAPI import

    overrides = {
        "stomp": args.stomp,
        "node_id": args.node_id,
        "share": args.share,
        "http": args.http,
        "lock_acquire_sleep_interval_ms": args.lock_acquire_sleep_interval_ms,
        "lock_keep_alive_period_ms": args.lock_keep_alive_period_ms,
        "takeover_delay_ms": args.takeover_delay_ms,
        "priority": args.priority,
        "lock_method": args.lock_method,
        "exec_stop_grace_ms": args.exec_stop_grace_ms,
        "log_level": args.log_level,
        "exec": args.exec_command,
        "force_unsupported_share": args.force_unsupported_share,
        "sync_policy": args.sync_policy,
        "admin_token_file": args.admin_token_file,
        "exec_max_restarts": args.exec_max_restarts,
        "exec_restart_window_s": args.exec_restart_window_s,
        "crash_loop_hold_off_ms": args.crash_loop_hold_off_ms,
        "registry_refresh_ms": args.registry_refresh_ms,
        "segment_max_bytes": args.segment_max_bytes,
        "max_message_size": args.max_message_size,
        "retention_max_age_s": args.retention_max_age_s,
        "retention_max_bytes": args.retention_max_bytes,
        "dedupe_window_messages": args.dedupe_window_messages,
    }
    if args.exec_marker and not args.exec_command:
        return _fail(
            EXIT_USAGE,
            "PRIMACY-2001 --exec needs a command after it, e.g. --exec -- mybroker --port 61616",
        )
    try:
        config = load_config(args.config, overrides)
    except ConfigError as exc:
        return _fail(EXIT_USAGE, f"PRIMACY-2001 {exc}")
    _setup_logging(config.log_level)
    verdict = check_for_run(config.share)
    refusal = _judge_mount(verdict, config.share, config.force_unsupported_share)
    if refusal:
        return _fail(EXIT_SHARE_UNUSABLE, refusal)
    try:
        check_share(config.share, config.lock_method)
    except ShareUnusable as exc:
        return _fail(EXIT_SHARE_UNUSABLE, f"PRIMACY-2002 {exc}")
    token = None
    if config.admin_token_file is not None:
        try:
            token = load_token(config.admin_token_file)
        except TokenFileError as exc:
            return _fail(EXIT_USAGE, f"PRIMACY-2005 {exc}")
    node = Node(
        config,
        admin_token=token,
        config_file=args.config,
        reload_config=lambda: load_config(args.config, overrides),
        share_check=share_check_for_status(verdict),
    )
    node.install_signal_handlers()
    try:
        return node.run()
    except ApiServerError as exc:
        return _fail(EXIT_CANNOT_LISTEN, f"PRIMACY-2003 {exc}")


def _judge_mount(verdict: Diagnosis, share: Path, force: bool) -> str | None:
    """Log the doctor's verdict on the share's mount; a refusal message unless forced."""
    log = logging.getLogger("primacy.cli")
    if verdict.refused and not force:
        return (
            f"{share_codes.RUN_SHARE_REFUSED} {verdict.summary()}; fix the mount, or start with "
            "--force-unsupported-share if you accept the risk"
        )
    if verdict.refused:
        log.warning(
            "%s starting on a refused share because --force-unsupported-share was given: %s",
            share_codes.RUN_SHARE_FORCED,
            verdict.summary(),
        )
    elif verdict.problems:
        log.warning("%s %s", share_codes.RUN_SHARE_WARNINGS, verdict.summary())
    return None


def share_check_for_status(verdict: Diagnosis) -> ShareCheck:
    """What `/status` shows of the start-up mount check: a node started only if not refused
    or forced, so a refused verdict here means it was forced."""
    outcome: Literal["fine", "warnings", "refused_but_forced"]
    if verdict.refused:
        outcome = "refused_but_forced"
    elif verdict.problems:
        outcome = "warnings"
    else:
        outcome = "fine"
    return ShareCheck(
        verdict=outcome,
        profile=verdict.profile.name if verdict.profile is not None else None,
        fs_type=verdict.mount.fs_type if verdict.mount is not None else None,
        mount_point=verdict.mount.mount_point if verdict.mount is not None else None,
        summary=verdict.summary(),
        findings=tuple(
            ShareFinding(
                code=finding.code,
                severity=finding.severity.name.lower(),
                summary=f"{finding.subject}: {finding.message}",
            )
            for finding in verdict.problems
        ),
    )


def _status_parser(subparsers: Any) -> None:
    status = subparsers.add_parser(
        "status",
        help="who is master: from the share itself or from a node's endpoint",
        description="Show who holds the lock, the current epoch and the known nodes, read from the "
        "share (--share) or from a running node's status endpoint (--url).",
    )
    source = status.add_mutually_exclusive_group(required=True)
    source.add_argument("--share", type=Path, help="the shared data directory")
    source.add_argument("--url", help="a node's status endpoint, e.g. http://127.0.0.1:8008")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    if args.url:
        return _status_from_url(args.url, args.json)
    return _status_from_share(args.share, args.json)


def _status_from_url(url: str, as_json: bool) -> int:
    target = url.rstrip("/") + "/status"
    try:
        with urllib.request.urlopen(target, timeout=5) as response:
            data = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return _fail(EXIT_FAILURE, f"PRIMACY-2004 cannot read {target}: {exc}")
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(
            f"node {data['node']}: {data['role']}, epoch {data['epoch']}, "
            f"{'serving' if data.get('serving') else 'not serving'}, "
            f"since {_when(data['since_unix_s'])}"
        )
    return EXIT_OK


def _status_from_share(share: Path, as_json: bool) -> int:
    if not share.is_dir():
        return _fail(
            EXIT_SHARE_UNUSABLE,
            f"PRIMACY-2002 the share {share} does not exist or is not a directory",
        )
    holder = read_holder_from_outside(share)
    epochs = EpochRegistry(share)
    latest = epochs.latest()
    nodes = NodeRegistry(share).entries()
    if as_json:
        print(
            json.dumps(
                {
                    "holder": None if holder is None else vars(holder),
                    "epoch": latest,
                    "epoch_record": epochs.read(latest) if latest else None,
                    "nodes": [vars(node) for node in nodes],
                },
                indent=2,
                sort_keys=True,
            )
        )
        return EXIT_OK
    if holder is None:
        print("lock: never taken")
    elif holder.released:
        print(
            f"lock: released by {holder.node_id} at {_when(holder.since_unix_s)} "
            f"(epoch {holder.epoch})"
        )
    else:
        print(
            f"lock: held by {holder.node_id} on {holder.host} pid {holder.pid}, "
            f"epoch {holder.epoch}, "
            f"since {_when(holder.since_unix_s)}"
        )
    print(f"current epoch: {latest}")
    now = time.time()
    for node in nodes:
        seen = "live" if node.is_live(now) else f"last seen {_when(node.updated_unix_s)}"
        print(f"  {node.node_id:<16} {node.role:<9} epoch {node.epoch!s:<6} {node.http:<22} {seen}")
    return EXIT_OK


def _when(unix_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix_s))


def _demo_parser(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo",
        help="start a three-node group on a temporary share and show failovers",
        description="Start three nodes on a temporary local share, show who is master, SIGKILL "
        "it and "
        "time the takeover, then hand over gracefully with SIGTERM. Everything started "
        "is stopped and the temporary share removed at the end.",
    )
    demo.add_argument("--nodes", type=int, default=3, help="group size (default 3)")
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from primacy.cli.demo import run_demo

    return run_demo(nodes=args.nodes)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


def _fail(code: int, message: str) -> int:
    print(f"primacy: {message}", file=sys.stderr)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="primacy",
        description="High availability for message brokers on shared storage: the node holding the "
        "share's lock is master, the others wait and take over when it goes.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _run_parser(subparsers)
    _status_parser(subparsers)
    _demo_parser(subparsers)
    register_admin_commands(subparsers)
    register_doctor_commands(subparsers)
    register_journal_commands(subparsers)
    register_messaging_commands(subparsers)
    register_replay_commands(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    own, exec_command = _split_exec(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(own)
    args.exec_command = exec_command
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
