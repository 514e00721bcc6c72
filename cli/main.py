"""The ``primacy`` command line: run a node, ask who is master, try a demo group."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from primacy.cli import codes
from primacy.cli.admin import PAUSED_NOTE, epoch_shown, role_shown
from primacy.cli.exits import (
    EXIT_FAILURE,
    EXIT_NO_MASTER,
    EXIT_OK,
    EXIT_OUTPUT_CLOSED,
    EXIT_SHARE_UNUSABLE,
    CommandLineParser,
    fail,
)
from primacy.cli.group_records import (
    GroupRecords,
    RecordsUnreadable,
    add_zookeeper_arguments,
    group_records,
)
from primacy.cli.run import add_parser as add_run_parser
from primacy.cli.run import share_check_for_status, split_exec
from primacy.cli.terminal import printable
from primacy.share.port import latest_epoch
from primacy.share.records import HOLDING_ROLES

# Re-exported for the tests and tools that import them from here.
__all__ = ["EXIT_SHARE_UNUSABLE", "build_parser", "main", "share_check_for_status"]


def _status_parser(subparsers: Any) -> None:
    status = subparsers.add_parser(
        "status",
        help="who is master: from the share itself or from a node's endpoint",
        description="Show who holds the lock, the current epoch and the known nodes, read from the "
        "share (--share), from the ZooKeeper ensemble of a group that coordinates there "
        "(--zookeeper), or from a running node's status endpoint (--url).",
        epilog=STATUS_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = status.add_mutually_exclusive_group(required=True)
    source.add_argument("--share", type=Path, help="the shared data directory")
    source.add_argument("--url", help="a node's status endpoint, e.g. http://127.0.0.1:8008")
    add_zookeeper_arguments(status, source)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument(
        "--ca-file",
        type=Path,
        metavar="FILE",
        help="for an https:// --url: the PEM CA to trust (default: the system's)",
    )
    status.set_defaults(func=cmd_status)


STATUS_EXIT_CODES = f"""exit codes:
  0  a live node serves as master (as the share, or the node asked, sees the group)
  1  the node's endpoint cannot be read
  3  the share (or the ZooKeeper ensemble) cannot be read
  {EXIT_NO_MASTER}  no live node serves as master: the group serves no client
  64 bad command line
"""


def cmd_status(args: argparse.Namespace) -> int:
    if args.url:
        return _status_from_url(args.url, args.json, args.ca_file)
    try:
        with group_records(args) as records:
            return _status_from_records(records, args.json)
    except RecordsUnreadable as exc:
        return fail(EXIT_SHARE_UNUSABLE, f"{codes.SHARE_UNUSABLE} {exc}")


def _status_from_url(url: str, as_json: bool, ca_file: Path | None = None) -> int:
    target = url.rstrip("/") + "/status"
    try:
        context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
        with urllib.request.urlopen(target, timeout=5, context=context) as response:
            data = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return fail(EXIT_FAILURE, f"{codes.STATUS_UNREADABLE} cannot read {target}: {exc}")
    members = data.get("cluster") or []
    has_master = bool(data.get("serving")) or any(
        isinstance(m, dict) and m.get("live") and m.get("role") == "master" for m in members
    )
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        # The endpoint's answer is untrusted text too: a node's name comes from its config.
        paused = ", group paused" if data.get("paused") else ""
        print(
            f"node {printable(data['node'])}: {printable(data['role'])}{paused}, "
            f"epoch {printable(epoch_shown(data['epoch']))}, "
            f"{'serving' if data.get('serving') else 'not serving'}, "
            f"since {_when(data['since_unix_s'])}"
        )
        if data.get("share_unusable"):  # why it claims nothing, with its code and the fix
            print(f"claims no epoch: {printable(data['share_unusable'])}")
    if not has_master:
        print(
            f"primacy: no live node serves as master, as {printable(data['node'])} sees the group",
            file=sys.stderr,
        )
        return EXIT_NO_MASTER
    return EXIT_OK


def _status_from_records(records: GroupRecords, as_json: bool) -> int:
    port = records.port
    holder = port.read_holder()
    latest = latest_epoch(port)
    record = port.read_epoch(latest) if latest else None
    nodes = port.node_entries()
    paused = port.is_paused()
    now = time.time()
    masters = [node.node_id for node in nodes if node.is_live(now) and node.role == "master"]
    found = EXIT_OK if masters else EXIT_NO_MASTER
    if as_json:
        print(
            json.dumps(
                {
                    "holder": None if holder is None else vars(holder),
                    "epoch": latest,
                    "epoch_record": None if record is None else record.to_json(),
                    "nodes": [vars(node) for node in nodes],
                    "paused": paused,
                    "live_masters": masters,
                },
                indent=2,
                sort_keys=True,
            )
        )
        return found
    if holder is None:
        print("lock: never taken")
    elif holder.released:
        print(
            f"lock: released by {printable(holder.node_id)} at {_when(holder.since_unix_s)} "
            f"(epoch {epoch_shown(holder.epoch)})"
        )
    else:
        print(
            f"lock: held by {printable(holder.node_id)} on {printable(holder.host)} "
            f"pid {holder.pid}, epoch {epoch_shown(holder.epoch)}, "
            f"since {_when(holder.since_unix_s)}"
        )
    print(f"current epoch: {latest}" if latest else "current epoch: none claimed yet")
    if paused:
        print(PAUSED_NOTE)
    roles = {node.node_id: role_shown(node, latest, paused=paused) for node in nodes}
    width = max([9, *(len(role) for role in roles.values())])
    for node in nodes:
        seen = "live" if node.is_live(now) else f"last seen {_when(node.updated_unix_s)}"
        print(
            f"  {printable(node.node_id):<16} {printable(roles[node.node_id]):<{width}} "
            f"epoch {epoch_shown(node.epoch):<6} {printable(node.http):<22} {seen}"
        )
    if not any(node.is_live(now) and node.role in HOLDING_ROLES for node in nodes):
        # A slave cannot tell a stranger's lock from a master's; this is the operator's hint.
        print(
            f"no live node is registered as master: if that lasts, `{records.doctor}` "
            "checks whether something else holds the lock"
        )
    return found


def _when(unix_s: object) -> str:
    """A time read from the share or a node, as local time; one no clock shows, as it is."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix_s))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        return f"(not a time: {printable(unix_s)[:40]})"


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


class _Version(argparse.Action):
    """``--version``: the installed package's version and whether its hot path is compiled,
    looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from primacy.store.compiled import hot_path
        from primacy.supervisor.version import package_version

        print(f"primacy {package_version()}\n{hot_path()}")
        parser.exit()


# The module that registers each command beyond this module's own: ``primacy CMD`` imports
# CMD's module only, not every command's libraries (the STOMP client, the journal tools,
# the mount doctor: a third of a short command's start; the suite runs hundreds).
REGISTERED_BY = {
    "cluster": "primacy.cli.admin",
    "switchover": "primacy.cli.admin",
    "pause": "primacy.cli.admin",
    "resume": "primacy.cli.admin",
    "forget": "primacy.cli.forget",
    "doctor": "primacy.cli.doctor",
    "systemd": "primacy.cli.doctor",
    "journal": "primacy.cli.journal",
    "epochs": "primacy.cli.epochs",
    "send": "primacy.cli.messaging",
    "consume": "primacy.cli.messaging",
    "replay": "primacy.cli.replay",
    "users": "primacy.cli.users",
}
_OWN_COMMANDS = ("run", "status", "demo")


def build_parser(*, run_flags: bool = True, only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line. ``run_flags=False`` leaves out ``run``'s flags, which are built
    from the configuration's declaration (pydantic): a command that does not run a node need
    not import it. ``only``: the command about to run, whose parser is then the only one
    built beside this module's own (a name no module registers builds them all, so its
    error lists every command)."""
    parser = CommandLineParser(
        prog="primacy",
        description="High availability for message brokers on shared storage: the node holding the "
        "share's lock is master, the others wait and take over when it goes.",
    )
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_run_parser(subparsers, with_flags=run_flags)
    _status_parser(subparsers)
    _demo_parser(subparsers)
    wanted = REGISTERED_BY.get(only or "")
    for module in dict.fromkeys(REGISTERED_BY.values()):  # in the order --help lists them
        if only is None or (only not in _OWN_COMMANDS and wanted in (None, module)):
            importlib.import_module(module).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    own, exec_command = split_exec(list(sys.argv[1:] if argv is None else argv))
    # No option comes before the command's name but --help and --version, which need no flags.
    args = build_parser(run_flags=own[:1] == ["run"], only=own[0] if own else None).parse_args(own)
    args.exec_command = exec_command
    if args.command == "run":  # a node: any exception is its bug, with its traceback
        ran: int = args.func(args)
        return ran
    try:
        result: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The output's reader went away (`primacy doctor --json | head`): what was left to
        # print is dropped, and the interpreter's flush at exit must not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OUTPUT_CLOSED
    return result


if __name__ == "__main__":
    sys.exit(main())
