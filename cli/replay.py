"""``primacy replay``: the Spark replay of a share's journal, from the command line.

pyspark is optional (the ``[spark]`` extra) and heavy, so it is imported only
when the command runs; without it, or without Java, the command says how to
get them instead of failing with a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from primacy.cli import codes
from primacy.cli.group_records import (
    RecordsUnreadable,
    add_zookeeper_arguments,
    group_location,
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

MISSING_EXTRA = (
    f"{codes.REPLAY_NEEDS_SPARK} the replay needs the spark extra "
    "(pyspark 4, pyarrow, pandas, matplotlib): "
    "pip install 'primacy[spark]' (from a checkout: .venv/bin/pip install -e '.[spark]')"
)
MISSING_JAVA = (
    f"{codes.REPLAY_NEEDS_JAVA} the replay needs Java 17 for Spark and found none: install it "
    "(Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
)


def register(subparsers: Any) -> None:
    """Add ``replay`` to the ``primacy`` command line."""
    from primacy.spark.replay import add_arguments  # pyspark-free: the job imports it when it runs

    replay = subparsers.add_parser(
        "replay",
        help="replay the journal on Spark into Parquet tables and a report",
        description="Read the share's journal with Spark (an embedded local[*] session unless "
        "--master is given) and write the Parquet tables records, messages, tenure, gaps and "
        "anomalies, plus report.html and report.json, into --out: every segment, or with "
        "--incremental only what the journal gained since the last run into that --out. "
        "Damaged and fenced records are reported, not fatal. A group that coordinates on "
        "ZooKeeper: give its ensemble with --zookeeper (its epoch claims are read there). "
        "See docs/replay.md.",
    )
    add_arguments(replay)
    # A group with coordination = "zookeeper" keeps its epoch claims on the ensemble, not in
    # the share's epochs/: the same flags as ``primacy status --zookeeper`` say where.
    add_zookeeper_arguments(replay, replay)
    replay.set_defaults(func=cmd_replay)


def missing_requirement() -> str | None:
    """Why the replay cannot start here, or None."""
    if importlib.util.find_spec("pyspark") is None:
        return MISSING_EXTRA
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and os.path.exists(os.path.join(java_home, "bin", "java"))) and not (
        shutil.which("java")
    ):
        return MISSING_JAVA
    return None


def cmd_replay(args: argparse.Namespace) -> int:
    problem = missing_requirement()
    if problem:
        print(f"primacy: {problem}", file=sys.stderr)
        return EXIT_FAILURE
    from primacy.spark.journal_plan import OptionError
    from primacy.spark.replay import options_from_args, run
    from primacy.spark.replay_state import OutputBusy

    try:
        options = options_from_args(args)
    except OptionError as exc:
        print(f"primacy: {codes.REPLAY_BAD_ARGUMENT} {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with epoch_claims_of(args):
            run(options)
    except RecordsUnreadable as exc:
        print(f"primacy: {codes.REPLAY_SHARE_NOT_READABLE} {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except OutputBusy as exc:
        print(f"primacy: {codes.REPLAY_OUTPUT_BUSY} {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as exc:
        from primacy.spark.journal_source import share_not_readable_in

        reason = share_not_readable_in(exc)  # else Spark's own error, traceback and all
        if reason is None:
            raise
        print(f"primacy: {codes.REPLAY_SHARE_NOT_READABLE} {reason}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


@contextmanager
def epoch_claims_of(args: argparse.Namespace) -> Iterator[None]:
    """For the run: where the tenure table reads the group's epoch claims. A group on the
    share's own files needs nothing (the job reads its epochs/); with ``--zookeeper``, the
    ensemble, through a reader's port (RecordsUnreadable if it cannot be read)."""
    if args.zookeeper is None:
        yield
        return
    from primacy.share.factory import reading
    from primacy.spark.tenure import claims_from

    with reading(group_location(args, Path(args.share))) as port, claims_from(port):
        yield
