"""``primacy run``: its flags are derived from the configuration's one declaration per key.

The configuration (pydantic) and the node (FastAPI, uvicorn) are imported only when ``run`` is
parsed or started: every other command builds this parser too, and those libraries would make
``primacy status`` or ``--help`` take over a second.
"""

from __future__ import annotations

import argparse
import logging
import resource
import signal
import types
import typing
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from primacy.api.admin import TokenFileError, load_token
from primacy.api.snapshot import ShareCheck, ShareFinding
from primacy.broker.admission import accept_backlog as stomp_backlog
from primacy.broker.tls import ServerTls, TlsFilesError
from primacy.broker.users import UsersFileError, load_users
from primacy.cli import codes
from primacy.cli.allocator import pin_mmap_threshold
from primacy.cli.exits import (
    EXIT_CANNOT_LISTEN,
    EXIT_CODES_HELP,
    EXIT_SHARE_UNUSABLE,
    EXIT_USAGE,
    fail,
    setup_logging,
)
from primacy.cli.group_agreement import GroupDisagrees, adopt_group_settings, join_group
from primacy.cli.zookeeper_access import judge_zookeeper_access
from primacy.locker.probe import ShareUnusable, check_share
from primacy.nfs_profiles import codes as share_codes
from primacy.nfs_profiles.doctor import Diagnosis, check_for_run

if TYPE_CHECKING:
    from primacy.supervisor.config import NodeConfig
    from primacy.supervisor.shell.node import Node


def add_parser(subparsers: Any, *, with_flags: bool = True) -> None:
    """``run`` and its flags; without them (``with_flags=False``) only its name and help line,
    for a command line that is not running ``run``."""
    run = subparsers.add_parser(
        "run",
        help="run this node's supervisor",
        description="Run a primacy supervisor: take the share's lock when it is free and serve as "
        "master, or wait as a slave. Every option can also be set in the --config TOML "
        "file (key = option name with underscores); options given here win. Options marked "
        "'live' take effect when the config file is edited; the others after a restart.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.set_defaults(func=cmd_run)
    if not with_flags:
        return
    from primacy.supervisor.config import NodeConfig

    run.add_argument("--config", type=Path, help="TOML config file")
    for name, field in NodeConfig.model_fields.items():
        if name == "exec":
            continue
        _add_key(run, name, field)
    run.add_argument(
        "--exec",
        dest="exec_marker",
        action="store_true",
        help="everything after --exec (and an optional --) is the command to run as "
        "the master's child, under a guardian that kills its whole tree once this node's "
        "claim lapses, whatever happens to the supervisor (see --exec-ready)",
    )


def _add_key(parser: argparse.ArgumentParser, name: str, field: Any) -> None:
    """One flag for one configuration key, from its declaration."""
    from primacy.store.config import NO_LIMIT_KEYS

    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    flag = "--" + name.replace("_", "-")
    names = [flag, *extra.get("aliases", [])]
    help_text = field.description or ""
    if extra.get("default_text"):
        help_text += f" (default {extra['default_text']})"
    elif not field.is_required() and field.default not in (None, (), False):
        default = field.default.value if isinstance(field.default, Enum) else field.default
        help_text += f" (default {default})"
    if extra.get("live"):
        help_text += " [live]"
    kind = _plain_type(field.annotation)
    options: dict[str, Any] = {"dest": name, "help": help_text.replace("%", "%%")}
    if extra.get("metavar"):
        options["metavar"] = extra["metavar"]
    if kind is bool:
        parser.add_argument(*names, action="store_true", default=None, **options)
        return
    if typing.get_origin(kind) is Literal:
        options["choices"] = list(typing.get_args(kind))
    elif isinstance(kind, type) and issubclass(kind, Enum):
        options["choices"] = [member.value for member in kind]
    elif kind in (int, float):
        options["type"] = _number(kind, allow_none=name in NO_LIMIT_KEYS)
    elif getattr(kind, "__name__", None) == "Path":  # by name: tests may patch pathlib's Path
        options["type"] = Path
    parser.add_argument(*names, **options)


def _plain_type(annotation: Any) -> Any:
    """``Int | None`` -> int, ``Annotated[int, Strict()]`` -> int; enums and literals as is."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _number(kind: type, *, allow_none: bool) -> Any:
    """The flag's text as the key's number type. Text that is no number is passed on as it is,
    so the configuration refuses it with the same message, naming the key, as in the file."""

    from primacy.store.config import NO_LIMIT

    def parse(text: str) -> Any:
        if allow_none and text.strip().lower() == NO_LIMIT:
            return NO_LIMIT  # the configuration reads it as no limit (None would mean "not given")
        try:
            return kind(text)
        except ValueError:
            return text

    return parse


def split_exec(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """Split ``... --exec -- CMD ARGS`` into primacy's own arguments and the command."""
    if "--exec" not in argv:
        return argv, None
    at = argv.index("--exec")
    command = argv[at + 1 :]
    if command[:1] == ["--"]:
        command = command[1:]
    return argv[: at + 1], command


def cmd_run(args: argparse.Namespace) -> int:
    from primacy.supervisor.config import CONFIG_KEYS, ConfigError, load_config

    overrides = {name: getattr(args, name, None) for name in CONFIG_KEYS}
    overrides["exec"] = args.exec_command
    if args.exec_marker and not args.exec_command:
        return fail(
            EXIT_USAGE,
            f"{codes.BAD_USAGE} --exec needs a command after it, "
            "e.g. --exec -- mybroker --port 61616",
        )
    try:
        config = load_config(args.config, overrides)
    except ConfigError as exc:
        return fail(EXIT_USAGE, f"{codes.BAD_USAGE} {exc}")
    setup_logging(config.log_level)
    logging.getLogger("primacy.cli").debug("allocator: %s", pin_mmap_threshold())
    config = fit_descriptor_limit(config)
    verdict = check_for_run(config.share)
    refusal = _judge_mount(verdict, config.share, config.force_unsupported_share)
    if refusal:
        return fail(EXIT_SHARE_UNUSABLE, refusal)
    try:  # the share's locks probed with the group's method before anything is recorded
        config, recorded = join_group(config, lambda c: check_share(c.share, c.lock_method))
    except GroupDisagrees as exc:
        return fail(EXIT_USAGE, str(exc))
    except (ShareUnusable, OSError) as exc:
        return fail(EXIT_SHARE_UNUSABLE, f"{codes.SHARE_UNUSABLE} {exc}")
    refusal = (
        _judge_stomp_users(config) or _judge_tls_files(config) or judge_zookeeper_access(config)
    )
    if refusal:
        return fail(EXIT_USAGE, refusal)
    token = None
    if config.admin_token_file is not None:
        try:
            token = load_token(config.admin_token_file)
        except TokenFileError as exc:
            return fail(EXIT_USAGE, f"{codes.TOKEN_FILE_REFUSED} {exc}")
    # The node (FastAPI, uvicorn, the broker: over half of a start's CPU) only now: a
    # configuration or share refused above is told without paying for it.
    from primacy.api.server import ApiServerError
    from primacy.supervisor.shell.node import Node

    node = Node(
        config,
        admin_token=token,
        config_file=args.config,
        reload_config=lambda: adopt_group_settings(load_config(args.config, overrides), recorded),
        share_check=share_check_for_status(verdict),
    )
    _stop_on_signals(node)
    try:
        return node.run()
    except ApiServerError as exc:
        return fail(EXIT_CANNOT_LISTEN, f"{codes.CANNOT_LISTEN} {exc}")


# Descriptors the node needs for itself whatever its clients do: journal segments and
# checkpoints, share directories, the lock, file watchers, the log, its event loops' own (an
# idle master holds 18).
_OWN_DESCRIPTORS = 40
_MIN_HTTP_CONNECTIONS = 4


def _listener_descriptors(connections: int, backlog: Callable[[int], int]) -> int:
    """What one listener may hold at once: its connections, as many more accepted in one
    wakeup before they are judged (its backlog), and itself."""
    return connections + backlog(connections) + 1 if connections else 0


def _most_connections(room: int, backlog: Callable[[int], int]) -> int:
    """The most connections a listener may serve within ``room`` descriptors (at least 1)."""
    fitting = [n for n in (room - backlog(room) - 1, (room - 1) // 2) if n >= 1]
    return max((n for n in fitting if _listener_descriptors(n, backlog) <= room), default=1)


def fit_descriptor_limit(config: NodeConfig) -> NodeConfig:
    """Raise the soft open-file limit to what both listeners may hold at once plus the node's
    own files (up to the hard limit); where the hard limit is lower, lower ``max_connections``
    and ``http_max_connections`` under it. A master whose clients take its last descriptors
    cannot open its next segment or look up the next epoch: it demotes, and the next master
    meets the same clients (found by trying: 45 idle STOMP connections under ``ulimit -n 48``,
    and 64 half-sent HTTP requests, issue 27)."""
    from primacy.api.server import accept_backlog as http_backlog

    stomp = config.max_connections if config.stomp is not None else 0
    http = config.http_max_connections
    needed = (
        _OWN_DESCRIPTORS
        + _listener_descriptors(http, http_backlog)
        + _listener_descriptors(stomp, stomp_backlog)
    )
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return config
    spare = max(0, soft - _OWN_DESCRIPTORS)
    # Health checks keep an eighth of what is spare (at least 4 connections); STOMP the rest.
    http = min(http, max(_MIN_HTTP_CONNECTIONS, spare // 8 // 2))
    if stomp:
        room = spare - _listener_descriptors(http, http_backlog)
        stomp = min(stomp, _most_connections(room, stomp_backlog))
    logging.getLogger("primacy.cli").warning(
        "%s the open-file limit is %d (hard %d): max_connections %d lowered to %d and "
        "http_max_connections %d to %d; raise LimitNOFILE= (or ulimit -n) to %d to serve them all",
        codes.DESCRIPTORS_LOW,
        soft,
        hard,
        config.max_connections,
        stomp or config.max_connections,
        config.http_max_connections,
        http,
        needed,
    )
    lowered = {"http_max_connections": http}
    if stomp:
        lowered["max_connections"] = stomp
    return config.model_copy(update=lowered)


def _judge_stomp_users(config: NodeConfig) -> str | None:
    """Refuse a users file that is unusable; say loudly that a broker without one is open."""
    if config.stomp is None:
        return None
    if config.stomp_users is None:
        logging.getLogger("primacy.cli").warning(
            "%s the STOMP connector on %s lets every client in, with any login or none: give "
            "it a users file (stomp_users, primacy users add FILE NAME) before it faces a network",
            codes.STOMP_OPEN,
            config.stomp,
        )
        return None
    try:
        load_users(config.stomp_users)
    except UsersFileError as exc:
        return f"{codes.USERS_FILE_REFUSED} {exc}"
    return None


def _judge_tls_files(config: NodeConfig) -> str | None:
    """Build each TLS context once at start, so a bad file is an exit 2, not a failed promotion."""
    for side in ("stomp", "http"):
        cert, key, ca = (getattr(config, f"{side}_tls_{part}") for part in ("cert", "key", "ca"))
        if cert is not None and key is not None:
            try:
                ServerTls(cert, key, ca)
            except TlsFilesError as exc:
                return f"{codes.TLS_FILES_REFUSED} {side}: {exc}"
    return None


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


def _stop_on_signals(node: Node) -> None:
    """SIGTERM (systemd's stop) and SIGINT (Ctrl-C) stop the node gracefully."""

    def on_signal(signum: int, _frame: object) -> None:
        node.request_stop(f"received {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
