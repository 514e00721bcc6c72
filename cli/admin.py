"""`primacy cluster`, `switchover`, `pause`, `resume`: see and steer a group."""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from primacy.cli import codes
from primacy.cli.group_records import RecordsUnreadable, add_zookeeper_arguments, group_records
from primacy.cli.terminal import printable
from primacy.share.port import ShareObserver, latest_epoch
from primacy.share.records import NodeEntry

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SHARE_UNUSABLE = 0, 1, 2, 3  # as cli/exits.py


class RequestFailed(Exception):
    """An HTTP request to a node failed; the message says which and why."""


def register(subparsers: Any) -> None:
    cluster = subparsers.add_parser(
        "cluster",
        help="list the group's nodes, roles and epochs, from the share",
        description="List every node registered in the share (or, for a group that coordinates "
        "on ZooKeeper, in its ensemble): role, epoch, status endpoint, last seen. Reads the "
        "records only; works while nodes are down.",
    )
    source = cluster.add_mutually_exclusive_group(required=True)
    source.add_argument("--share", type=Path, help="the shared data directory")
    add_zookeeper_arguments(cluster, source)
    cluster.add_argument("--json", action="store_true", help="print JSON")
    cluster.set_defaults(func=cmd_cluster)

    for name, help_text in (
        ("switchover", "hand the master role to another node without losing acknowledged messages"),
        ("pause", "pause the group: keep roles, take no automatic action (maintenance)"),
        ("resume", "end a pause"),
    ):
        parser = subparsers.add_parser(
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ". Needs the admin token.",
        )
        parser.add_argument(
            "--url",
            required=True,
            action="append",
            help="a node's status endpoint, e.g. http://10.0.0.1:8008; the token is sent only to "
            "these addresses, never to one read from the share"
            + (" (give every node's, or at least the master's)" if name == "switchover" else ""),
        )
        parser.add_argument(
            "--token-file", type=Path, required=True, help="file holding the admin bearer token"
        )
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
        if name == "switchover":
            parser.add_argument(
                "--to",
                metavar="NODE",
                help="the node to hand over to (default: the live slave with the highest priority)",
            )
            parser.add_argument(
                "--wait-s",
                type=float,
                default=30.0,
                help="how long to wait for the new master (default 30)",
            )
        parser.set_defaults(func=_ADMIN_COMMANDS[name])


def cmd_cluster(args: argparse.Namespace) -> int:
    try:
        with group_records(args) as records:
            return _show_cluster(records.port, args.json)
    except RecordsUnreadable as exc:
        print(f"primacy: {codes.SHARE_UNUSABLE} {exc}", file=sys.stderr)
        return EXIT_SHARE_UNUSABLE


def _show_cluster(port: ShareObserver, as_json: bool) -> int:
    now = time.time()
    entries = port.node_entries()
    paused = port.is_paused()  # the group's, so every member's: each row says it
    if as_json:
        members = [{**vars(e), "live": e.is_live(now), "paused": paused} for e in entries]
        print(json.dumps(members, indent=2))
        return EXIT_OK
    if paused:
        print(PAUSED_NOTE)
    if not entries:
        print("no node has registered in this share yet")
        return EXIT_OK
    current = latest_epoch(port)
    roles = {e.node_id: role_shown(e, current, paused=paused) for e in entries}
    width = max([9, *(len(role) for role in roles.values())])
    print(
        f"{'node':<16} {'role':<{width}} {'epoch':>5}  {'priority':<8} {'status endpoint':<22} "
        "last seen"
    )
    for e in entries:
        seen = "live" if e.is_live(now) else f"{now - e.updated_unix_s:.0f} s ago (gone?)"
        epoch = epoch_shown(e.epoch)
        print(
            f"{printable(e.node_id):<16} {printable(roles[e.node_id]):<{width}} {epoch:>5}  "
            f"{printable(e.priority):<8} {printable(e.http):<22} {seen}"
        )
    return EXIT_OK


def epoch_shown(epoch: int | None) -> str:
    """An epoch for people: ``-`` for a node that never held one."""
    return "-" if epoch is None else str(epoch)


PAUSED_NOTE = (
    "group: PAUSED: no node takes over or steps down on its own, failover is off until "
    "`primacy resume`"
)


def role_shown(entry: NodeEntry, current_epoch: int, *, paused: bool = False) -> str:
    """A registry entry's role for people. An entry says what its node last wrote: a master
    killed a moment ago still reads ``master`` (and live, until its entry ages) beside the
    new master, so a master entry below the share's newest epoch says it is stale. In a
    paused group every role is held, and says so."""
    role = entry.role
    if entry.role == "master" and (entry.epoch is None or entry.epoch < current_epoch):
        held = "no epoch" if entry.epoch is None else f"epoch {entry.epoch}"
        role = f"master (stale: {held}, current {current_epoch})"
    return f"{role}, paused" if paused else role


# Right after a takeover the new master may still be in its takeover wait.
MASTER_WAIT_S = 3.0


def _named_master(urls: list[str]) -> str:
    """The one of the operator's ``urls`` that serves as master (waiting a little for one).

    The token goes only to addresses the operator named: the share's registry is
    untrusted input (anyone who can write the share could list an address of theirs
    as the master's and collect the token), so it is used only to say what to add.
    """
    deadline = time.monotonic() + MASTER_WAIT_S
    while True:
        for url in urls:
            if _is_master(url.rstrip("/")):
                return url
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    try:
        members: list[dict[str, Any]] = _request(urls[0], "GET", "/cluster")["members"]
    except RequestFailed:
        members = []
    registered = [m for m in members if m["live"] and m["role"] == "master"]
    if not registered:
        raise RequestFailed(
            f"none of {', '.join(urls)} serves as master and no live master is registered; "
            "nothing to switch over"
        )
    if len(registered) > 1:  # one at most is real: the registry is written by whoever can
        claims = ", ".join(
            f"{printable(m['node_id'])} at http://{printable(m['http'])}" for m in registered
        )
        raise RequestFailed(
            f"none of {', '.join(urls)} serves as master, and the share's registry lists "
            f"{len(registered)} masters ({claims}): at most one is real, so check the share "
            "for planted entries and name your master's address with --url"
        )
    (master,) = registered
    node_id, http = printable(master["node_id"]), printable(master["http"])
    raise RequestFailed(
        f"none of {', '.join(urls)} serves as master; the share's registry says "
        f"{node_id} at http://{http} is: the token goes only to "
        f"addresses you name, so add --url http://{http} if that is your node"
    )


def cmd_switchover(args: argparse.Namespace) -> int:
    try:
        token = _token(args.token_file)
        master_url = _named_master(args.url)
        body = {"to": args.to} if args.to else {}
        started = time.monotonic()
        # The answer names the target's address as the share listed it when the master chose
        # (its /cluster may be older: a slave that registered a moment ago is not in it yet).
        answer = _request(master_url, "POST", "/switchover", token, body)
        if not args.json:
            print(
                f"switchover from {printable(answer['from'])} to {printable(answer['to'])} "
                f"(epoch {printable(answer['epoch'])}) ..."
            )
        deadline = started + args.wait_s
        while time.monotonic() < deadline:
            # An unauthenticated GET: the registry's address is good enough to watch.
            if _is_master(f"http://{answer['to_http']}"):
                took_s = time.monotonic() - started
                if args.json:
                    shown = {key: answer.get(key) for key in ("from", "to", "epoch", "to_http")}
                    print(json.dumps({**shown, "serving_after_s": round(took_s, 3)}))
                else:
                    print(f"{printable(answer['to'])} is serving as master after {took_s:.2f} s")
                return EXIT_OK
            time.sleep(0.02)
        raise RequestFailed(
            f"{printable(answer['to'])} did not become master within {args.wait_s} s"
        )
    except TokenRefused as exc:
        print(f"primacy: {codes.TOKEN_FILE_REFUSED} {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RequestFailed as exc:
        print(f"primacy: {codes.ADMIN_COMMAND_FAILED} {exc}", file=sys.stderr)
        return EXIT_FAILED


def cmd_pause(args: argparse.Namespace) -> int:
    return _simple(args, "/pause", "the group is paused: no node will take over until resumed")


def cmd_resume(args: argparse.Namespace) -> int:
    return _simple(args, "/resume", "the group is resumed")


_ADMIN_COMMANDS = {"switchover": cmd_switchover, "pause": cmd_pause, "resume": cmd_resume}


def _simple(args: argparse.Namespace, path: str, done: str) -> int:
    try:
        token = _token(args.token_file)
        for url in args.url:  # group-wide: each named node writes the same marker
            _request(url, "POST", path, token)
    except TokenRefused as exc:
        print(f"primacy: {codes.TOKEN_FILE_REFUSED} {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RequestFailed as exc:
        print(f"primacy: {codes.ADMIN_COMMAND_FAILED} {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(json.dumps({"paused": path == "/pause", "nodes": args.url}))
    else:
        print(done)
    return EXIT_OK


class TokenRefused(Exception):
    """The token file holds no usable token; the message says why, never what it holds."""


# A token is one line of a few dozen characters (api/admin.py reads at most this much).
MAX_TOKEN_BYTES = 4096


def _token(path: Path) -> str:
    """The bearer token in ``path``: one line of printable ASCII, what an HTTP header carries.

    Anything else is refused without a word of its content: a wrong --token-file may name a
    configuration file or a private key, and an error that quoted it would print a secret.
    """
    shown = printable(str(path))
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise TokenRefused(f"cannot read the token file {shown}: {exc.strerror}") from None
    token = raw.strip()
    lines = len(token.splitlines())
    if len(raw) > MAX_TOKEN_BYTES:
        why = f"is over {MAX_TOKEN_BYTES} bytes"
    elif lines != 1:
        why = f"has {lines} lines" if lines else "is empty"
    elif any(byte < 0x20 or byte > 0x7E for byte in token):
        why = "holds a character that is not printable ASCII"
    else:
        return token.decode("ascii")
    raise TokenRefused(
        f"the token file {shown} does not hold a token: one line of printable ASCII is "
        f"expected, and it {why} (its content is not shown); give the admin_token_file "
        "the nodes read"
    )


def _is_master(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/master", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _request(
    base: str, method: str, path: str, token: str | None = None, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    data = json.dumps(body or {}).encode() if method != "GET" else None
    request = urllib.request.Request(base.rstrip("/") + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            result: dict[str, Any] = json.loads(response.read())
            return result
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        try:
            detail = json.loads(detail).get("error", detail)
        except (ValueError, AttributeError):
            pass
        hint = {
            401: " (no token sent)",
            403: " (wrong token)",
            404: " (admin is off on that node: start it with --admin-token-file)",
        }
        raise RequestFailed(
            f"{method} {path} on {base}: {exc.code} {detail}{hint.get(exc.code, '')}"
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise RequestFailed(f"{method} {path} on {base} failed: {exc}") from exc
    except ValueError as exc:  # http.client quotes a refused header's value: never shown
        what = "the token is no valid header value" if "header" in str(exc) else "no JSON"
        raise RequestFailed(f"{method} {path} on {base} failed: {what}") from None
