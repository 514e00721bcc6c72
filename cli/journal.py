"""``primacy journal verify|dump|stats SHARE``: the command-line face of store.tools."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from primacy.cli import codes
from primacy.cli.terminal import printable
from primacy.share.layout import journal_dir
from primacy.store import tools
from primacy.store.errors import JournalError
from primacy.store.segments import Damage

Command = Callable[[argparse.Namespace], int]


def register(subparsers: Any) -> None:
    """Add the ``journal`` command and its subcommands; each sets ``func(args) -> exit code``."""
    journal = subparsers.add_parser("journal", help="inspect the journal on a share (read-only)")
    commands = journal.add_subparsers(dest="journal_command", required=True)

    verify = commands.add_parser("verify", help="check every batch and every checkpoint")
    verify.add_argument("share", type=Path)
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.set_defaults(func=_reporting_journal_errors(run_verify))

    dump = commands.add_parser("dump", help="print valid records in sequence order")
    dump.add_argument("share", type=Path)
    dump.add_argument("--from", dest="from_sequence", type=int, default=0, metavar="SEQ")
    dump.add_argument("--json", action="store_true", help="one JSON object per line")
    dump.set_defaults(func=_reporting_journal_errors(run_dump))

    stats = commands.add_parser("stats", help="records, bytes, segments, epochs, fenced, damaged")
    stats.add_argument("share", type=Path)
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(func=_reporting_journal_errors(run_stats))


def _reporting_journal_errors(command: Command) -> Command:
    """A share without a journal is one line on stderr and exit status 3 (as for every
    command that reads the share); a journal this release cannot read, exit status 2."""

    def run(args: argparse.Namespace) -> int:
        journal = journal_dir(args.share)
        if not Path(args.share).is_dir() or not journal.is_dir():
            print(
                f"primacy journal: {codes.SHARE_UNUSABLE} {args.share} is not a share with a "
                f"journal (no directory {journal})",
                file=sys.stderr,
            )
            return 3
        try:
            return command(args)
        except JournalError as error:
            print(f"primacy journal: {error}", file=sys.stderr)
            return 2

    return run


def run_verify(args: argparse.Namespace) -> int:
    result = tools.verify(args.share)
    report = result.report
    if args.json:
        verdict = {
            "ok": result.ok,
            "segments": report.segments,
            "batches": report.batches_read,
            "records": report.records_applied,
            "fenced_records": report.fenced_records,
            "damaged": len(report.damaged),
            "torn_tails": [{"segment": t.segment, "offset": t.offset} for t in report.torn_tails],
            "problems": list(result.problems),
        }
        print(json.dumps(verdict, indent=2, default=str))
        return 0 if result.ok else 1
    print(
        f"{report.segments} segment(s), {report.batches_read} valid batch(es), "
        f"{report.records_applied} record(s); {len(report.torn_tails)} torn tail(s), "
        f"{len(report.damaged)} damaged, {report.fenced_records} fenced record(s)"
    )
    for torn in report.torn_tails:
        print(
            f"torn tail (cut off, expected after a crash): {printable(torn.segment)} "
            f"from byte {torn.offset}"
        )
    for problem in result.problems:
        print(f"PROBLEM: {printable(problem)}")
    return 0 if result.ok else 1


def run_dump(args: argparse.Namespace) -> int:
    def emit(record: dict[str, Any]) -> None:
        if args.json:
            print(json.dumps(record, sort_keys=True))
        else:
            what = record.get("destination") or record.get("event") or record.get("fence", "")
            print(
                f"{record['sequence']:>10} e{record['epoch']} {record['type']:<7} "
                f"{printable(what)} {printable(record.get('message_id', ''))}"
            )

    undecodable: list[Damage] = []
    try:
        report = tools.dump(args.share, emit, args.from_sequence, undecodable.append)
    except BrokenPipeError:  # `| head` is a normal way to read a dump
        sys.stderr.close()
        return 0
    damaged = [*report.damaged, *undecodable]
    for damage in damaged:
        print(
            f"primacy journal: damaged {damage.kind.value} in {printable(damage.segment)} at "
            f"byte {damage.offset} ({damage.length} bytes), not dumped: "
            f"{printable(damage.reason)}",
            file=sys.stderr,
        )
    return 1 if damaged else 0


def run_stats(args: argparse.Namespace) -> int:
    figures = tools.stats(args.share)
    if args.json:
        print(json.dumps(asdict(figures), indent=2, default=str))
    else:
        for key, value in asdict(figures).items():
            print(f"{key}: {printable(value)}")
    if figures.damaged_batches:
        print("damaged batches: `primacy journal verify` says where and why", file=sys.stderr)
        return 1
    return 0
