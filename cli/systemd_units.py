"""The ``primacy systemd install|uninstall`` commands: the units, run by this installation.

The unit files ship inside the package (``primacy/systemd/`` of the wheel; ``systemd/`` of a
checkout, which is the same folder). As written there they start ``/usr/local/bin/primacy``;
``install`` writes them with ``ExecStart=`` naming the ``primacy`` of the installation that
runs it (``/opt/primacy/bin/primacy`` for a virtualenv at ``/opt/primacy``), or ``--binary``,
so a unit never runs another installation than the one that wrote it. The configuration
templates are copied once and then belong to the operator.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primacy.nfs_profiles import codes

SOURCE_DIR = Path(__file__).resolve().parent.parent / "systemd"
UNIT_FILES = (
    "primacy@.service",
    "primacy-exec@.service",
    "primacy-replay@.service",
    "primacy-replay@.timer",
)
UNIT_DIR = "etc/systemd/system"
PLACEHOLDER_BINARY = "/usr/local/bin/primacy"
"""What the shipped units' ``ExecStart=`` names; ``install`` replaces it."""
_EXEC_START = re.compile(rf"^ExecStart={re.escape(PLACEHOLDER_BINARY)}(?= )", re.M)
# A path systemd reads as one word, with no specifier (%) or variable ($) to expand.
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9_.+@:/-]*")


@dataclass(frozen=True)
class ConfigFile:
    """A file installed once and then owned by the operator: never overwritten or removed."""

    source_name: str
    target: str


CONFIG_FILES = (
    ConfigFile("primacy.default", "etc/default/primacy"),
    ConfigFile("example-group.toml", "etc/primacy/example-group.toml"),
)


def installed_binary() -> Path:
    """The ``primacy`` script of the installation this code runs from (its scripts folder:
    ``/opt/primacy/bin`` for a virtualenv there), whether or not it exists."""
    return Path(sysconfig.get_path("scripts")) / "primacy"


def register(subparsers: Any) -> None:
    """Add ``systemd`` to the ``primacy`` command's subparsers."""
    systemd = subparsers.add_parser(
        "systemd", help="install or remove the systemd units", description=_description()
    )
    actions = systemd.add_subparsers(dest="systemd_action", required=True, metavar="ACTION")
    for action, func, help_text in (
        ("install", run_install, "write the units (and, once, the config templates)"),
        ("uninstall", run_uninstall, "remove the units; configuration stays"),
    ):
        parser = actions.add_parser(action, help=help_text, description=help_text)
        parser.add_argument("--prefix", type=Path, default=Path("/"), help="root to install under")
        parser.add_argument("--source", type=Path, default=SOURCE_DIR, help=argparse.SUPPRESS)
        if action == "install":
            parser.add_argument(
                "--binary",
                type=Path,
                default=None,
                help=(
                    "the primacy the units run (default: this installation's, "
                    f"{installed_binary()})"
                ),
            )
        parser.set_defaults(func=func)


def _description() -> str:
    return (
        f"Write {', '.join(UNIT_FILES)} to PREFIX/{UNIT_DIR}, starting this installation's "
        "primacy as the user primacy, and the environment file and an example group config "
        "once. Then: systemctl daemon-reload; systemctl enable --now primacy@GROUP.service."
    )


def render_unit(text: str, binary: Path) -> str:
    """A shipped unit's text with its ``ExecStart=`` running ``binary``."""
    return _EXEC_START.sub(f"ExecStart={binary}", text)


def _binary_problem(binary: Path, given: bool) -> str | None:
    if not _PLAIN_PATH.fullmatch(str(binary)):
        return (
            f"{binary} cannot stand in a unit's ExecStart= as it is: give an absolute path "
            "without spaces, quotes, % or $ (a symlink to it will do) with --binary"
        )
    if not binary.is_file():
        where = "" if given else " (this installation has no primacy script)"
        return f"{binary} does not exist{where}: give the primacy to run with --binary"
    return None


def run_install(args: argparse.Namespace) -> int:
    source: Path = args.source
    missing = [
        name
        for name in (*UNIT_FILES, *(f.source_name for f in CONFIG_FILES))
        if not (source / name).is_file()
    ]
    if missing:
        print(
            f"{codes.SYSTEMD_SOURCE_MISSING} the unit files are not in {source} "
            f"(missing {', '.join(missing)}); install primacy from its wheel "
            "(docs/operator-guide.md, Installing on a host) or copy them by hand as "
            "systemd/README.md describes",
            file=sys.stderr,
        )
        return 1
    binary: Path = args.binary or installed_binary()
    problem = _binary_problem(binary, given=args.binary is not None)
    if problem is not None:
        print(f"{codes.SYSTEMD_BINARY_UNUSABLE} {problem}", file=sys.stderr)
        return 1
    prefix: Path = args.prefix
    unit_dir = prefix / UNIT_DIR
    unit_dir.mkdir(parents=True, exist_ok=True)
    for name in UNIT_FILES:
        (unit_dir / name).write_text(render_unit((source / name).read_text(), binary))
        (unit_dir / name).chmod(0o644)
        print(f"{codes.SYSTEMD_INSTALLED} installed {unit_dir / name}")
    for config in CONFIG_FILES:
        target = prefix / config.target
        if target.exists():
            print(f"{codes.SYSTEMD_INSTALLED} kept {target} (already there)")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / config.source_name, target)
        target.chmod(0o644)
        print(f"{codes.SYSTEMD_INSTALLED} installed {target}")
    print(f"the units run {binary} as the user primacy")
    print(
        "next: create the user (same uid on every node), write /etc/primacy/GROUP.toml, then "
        "systemctl daemon-reload && systemctl enable --now primacy@GROUP.service"
    )
    return 0


def run_uninstall(args: argparse.Namespace) -> int:
    unit_dir = args.prefix / UNIT_DIR
    for name in UNIT_FILES:
        path = unit_dir / name
        if path.exists():
            path.unlink()
            print(f"{codes.SYSTEMD_UNINSTALLED} removed {path}")
    kept = [str(args.prefix / config.target) for config in CONFIG_FILES]
    print(f"kept the configuration ({', '.join(kept)}, /etc/primacy); run systemctl daemon-reload")
    return 0
