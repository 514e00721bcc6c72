"""The replay job: a share's journal into Parquet tables and a report, locally or on a cluster.

Run it as ``primacy replay SHARE --out DIR`` (an embedded ``local[*]`` Spark)
or unchanged as ``spark-submit spark/replay.py SHARE --out DIR`` on a cluster;
docs/replay.md says what executors need. pyspark is imported only once the
job runs, so ``add_arguments`` serves the ``primacy`` CLI without it.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script by spark-submit, Python put this file's directory first on the
    # path, making its modules importable under bare names. ``primacy`` itself comes
    # from the installed package or the ``--py-files`` bundle (docs/replay.md).
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from primacy.share.layout import journal_dir
from primacy.spark.journal_plan import OptionError, parse_time
from primacy.spark.replay_state import OutputBusy, forget_state, read_state, writing

_RECORD_STATUSES = ("ok", "fenced")
TABLES = ("records", "messages", "tenure", "gaps", "anomalies")
STEPS = 6


@dataclass(frozen=True)
class ReplayOptions:
    """One replay: where from, where to, on what Spark, which records."""

    share: str
    out: str
    master: str | None = None  # None: local[*], unless spark-submit chose one
    since: str | None = None
    until: str | None = None
    epochs: str | None = None
    quiet: bool = False
    incremental: bool = False

    @property
    def windowed(self) -> bool:
        return bool(self.since or self.until or self.epochs)

    @property
    def out_is_local(self) -> bool:
        return "://" not in self.out or self.out.startswith("file://")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The replay's command line, shared by ``primacy replay`` and ``spark/replay.py``."""
    parser.add_argument("share", help="the shared data directory (its journal/ and epochs/)")
    parser.add_argument("--out", required=True, help="directory for the tables and the report")
    parser.add_argument(
        "--master",
        help="Spark master URL, e.g. spark://host:7077 or yarn (default: local[*], or "
        "spark-submit's --master)",
    )
    parser.add_argument(
        "--since", metavar="T", help="records at or after T (ISO 8601 UTC or Unix s)"
    )
    parser.add_argument("--until", metavar="T", help="records before T (ISO 8601 UTC or Unix s)")
    parser.add_argument("--epochs", metavar="N[,N...]", help="only these epochs")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--incremental",
        action="store_true",
        help="read only the segments added, and the bytes appended, since the last run into "
        "--out (as its replay-state.json records), add their records to the records table, and "
        "recompute the other tables and the report from the whole table; with no state in "
        "--out, read everything. --out must be a local path; not with --since, --until or "
        "--epochs",
    )


def options_from_args(args: argparse.Namespace) -> ReplayOptions:
    """Validate the arguments once, before any Spark starts; OptionError says what is wrong."""
    for name in ("since", "until"):
        value = getattr(args, name)
        if value:
            parse_time(value)
    if not journal_dir(args.share).is_dir():
        raise OptionError(f"{args.share} has no journal/ directory; give the share itself")
    options = ReplayOptions(
        share=os.path.abspath(args.share),
        out=args.out if "://" in args.out else os.path.abspath(args.out),
        master=args.master,
        since=args.since,
        until=args.until,
        epochs=args.epochs,
        quiet=args.quiet,
        incremental=args.incremental,
    )
    if options.incremental:
        if options.windowed:
            raise OptionError(
                "--incremental reads the whole journal a piece at a time; it cannot be "
                "combined with --since, --until or --epochs"
            )
        if not options.out_is_local:
            raise OptionError(
                f"--incremental needs a local --out (its state file is replaced by a rename); "
                f"{options.out} is not"
            )
        read_state(_local_path(options.out), options.share)  # damaged or another share's: say so
    return options


def start_session(master: str | None) -> Any:
    """An embedded local session by default; under spark-submit, the one it configured."""
    from pyspark.sql import SparkSession

    from primacy.spark.journal_source import register

    builder = SparkSession.builder.appName("primacy-replay")
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if master or not under_submit:
        builder = builder.master(master or "local[*]")
    if not under_submit:
        # Python workers must find this package and store/: use this interpreter.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.ui.enabled", "false")  # no port clashes on shared hosts
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    builder = builder.config("spark.log.level", "ERROR")
    # Our own progress lines instead of Spark's bar, which rewrites one terminal line.
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    builder = builder.config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    session = builder.getOrCreate()
    if not str(session.sparkContext.master).startswith("local"):
        ship_code(session)
    register(session)
    return session


def write_code_bundle(archive: Path) -> Path:
    """Zip ``primacy.spark``, ``primacy.store`` and ``primacy.share`` (the journal's layout and
    safe reads) for executors that lack primacy (they still need numpy, pyarrow, crc32c):
    ``--py-files`` for ``spark-submit``."""
    root = Path(__file__).resolve().parents[1]
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("primacy/__init__.py", "")
        for package in ("spark", "store", "share"):
            for source in sorted((root / package).glob("*.py")):
                bundle.write(source, f"primacy/{package}/{source.name}")
    return archive


CODE_BUNDLE_NAME = "primacy_replay.zip"


def ship_code(session: Any) -> None:
    """Send the replay's code to the executors, unless ``--py-files`` already sends the bundle.

    ``spark-submit --py-files primacy_replay.zip`` (docs/replay.md) has shipped
    it, and Spark refuses a second file of the same name from another path.
    """
    submitted = session.sparkContext.getConf().get("spark.submit.pyFiles", "")
    if any(Path(name).name == CODE_BUNDLE_NAME for name in submitted.split(",") if name):
        return
    bundle_dir = tempfile.mkdtemp(prefix="primacy-replay-")
    # The driver serves the file to executors until its session ends: removed at exit.
    atexit.register(shutil.rmtree, bundle_dir, True)
    archive = write_code_bundle(Path(bundle_dir) / CODE_BUNDLE_NAME)
    session.sparkContext.addPyFile(str(archive))


def run(options: ReplayOptions, session: Any | None = None) -> dict[str, Any]:
    """Replay the journal; returns the report's headline figures (also in report.json).

    A session started here is stopped here; one given is left running. A local ``--out``
    is held for the run (``replay_state.writing``), before any session starts."""
    with writing(_local_path(options.out)) if options.out_is_local else nullcontext():
        if session is not None:
            return _replay(options, session)
        session = start_session(options.master)
        try:
            return _replay(options, session)
        finally:
            session.stop()


def _replay(options: ReplayOptions, session: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from primacy.spark import replay_tables as tables
    from primacy.spark.replay_progress import Progress
    from primacy.spark.replay_records import read_records
    from primacy.spark.replay_report import ReportInputs, write_html, write_json
    from primacy.spark.tenure import build_gaps, build_tenures, read_epoch_claims

    progress = Progress(session.sparkContext, STEPS, enabled=not options.quiet)
    out = options.out.rstrip("/")
    progress.say(f"{options.share} -> {out} on {session.sparkContext.master}")
    started = time.monotonic()

    first_step = (
        "records: decoding what is new since the last run"
        if options.incremental
        else "records: decoding every segment"
    )
    with progress.step(first_step):
        _write_records(session, options, out, progress)
        records = read_records(session, out)
    with progress.step("messages: pairing sends, deliveries and acks"):
        tables.messages(records).write.mode("overwrite").parquet(f"{out}/messages")
        messages = session.read.parquet(f"{out}/messages")
    with progress.step("anomalies: damage, fences, duplicates, sequence gaps"):
        tables.anomalies(session, records).write.mode("overwrite").parquet(f"{out}/anomalies")
    with progress.step("tenure and gaps: who was master when"):
        tenures = build_tenures(
            tables.epoch_facts(records),
            _claims_in_range(read_epoch_claims(options.share), options),
            tables.role_events(records),
        )
        gaps = build_gaps(tenures)
        _write_rows(session, f"{out}/tenure", _tenure_rows(tenures), _TENURE_COLUMNS)
        _write_rows(session, f"{out}/gaps", _gap_rows(gaps), _GAP_COLUMNS)
    with progress.step("figures for the report"):
        by_status = _counts(records.groupBy("status", "type"))
        by_state = {r["state"]: r["count"] for r in messages.groupBy("state").count().collect()}
        redeliveries = messages.agg(F.sum("redeliveries")).first()[0] or 0
        quantiles = (
            messages.where(F.col("time_in_queue_ms").isNotNull())
            .agg(
                F.percentile_approx("time_in_queue_ms", [0.5, 0.9, 0.99]).alias("q"),
                F.max("time_in_queue_ms").alias("max"),
            )
            .first()
        )
        span = (
            records.where(F.col("status") == "ok")
            .agg(F.min("timestamp").alias("first"), F.max("timestamp").alias("last"))
            .first()
        )
        anomaly_rows = session.read.parquet(f"{out}/anomalies").groupBy("kind").count().collect()
        throughput = [
            (r["minute"], r["destination"], r["count"])
            for r in tables.throughput_per_minute(records).collect()
        ]
        histogram = [
            (float(r["log10_ms"]), r["count"])
            for r in tables.time_in_queue_histogram(messages).collect()
        ]
    with progress.step("report.html and report.json"):
        q = (quantiles["q"] if quantiles else None) or [None, None, None]
        headline = {
            "share": options.share,
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "window": {"since": options.since, "until": options.until, "epochs": options.epochs},
            "first_record": _iso(span["first"] if span else None),
            "last_record": _iso(span["last"] if span else None),
            "records_ok": sum(n for (s, _), n in by_status.items() if s == "ok"),
            "records_fenced": sum(n for (s, t), n in by_status.items() if s == "fenced" and t),
            "damaged_ranges": sum(
                n for (s, _), n in by_status.items() if s not in _RECORD_STATUSES
            ),
            "sends": by_status.get(("ok", "SEND"), 0),
            "acks": by_status.get(("ok", "ACK"), 0),
            "deliveries": by_status.get(("ok", "DELIVER"), 0),
            "redeliveries": redeliveries,
            "messages": by_state,
            "time_in_queue_ms": {"p50": q[0], "p90": q[1], "p99": q[2],
                                 "max": quantiles["max"] if quantiles else None},
            "epochs": len(tenures),
        }  # fmt: skip
        inputs = ReportInputs(
            headline=headline,
            tenures=tenures,
            gaps=gaps,
            throughput=throughput,
            queue_histogram=histogram,
            anomalies_by_kind={r["kind"]: r["count"] for r in anomaly_rows},
        )
        report_dir = _local_report_dir(out, progress)
        document = write_json(report_dir / "report.json", inputs)
        write_html(report_dir / "report.html", inputs, document)
    progress.say(
        f"done in {time.monotonic() - started:.1f} s: {headline['records_ok']} records, "
        f"{len(document['failovers'])} failover(s), {document['gaps']['count']} gap(s), "
        f"{sum(inputs.anomalies_by_kind.values())} anomaly row(s); tables and report in {out}"
    )
    return document


def _write_records(session: Any, options: ReplayOptions, out: str, progress: Any) -> None:
    """The records table: continued from the state in ``out`` where it can be, else rewritten."""
    from primacy.spark import replay_records

    if options.out_is_local and not options.windowed:
        local = _local_path(out)
        done = replay_records.write_continued(
            session, options.share, local, incremental=options.incremental
        )
        if options.incremental:
            read = f"    {done.segments_read} of {done.segments_listed} segment(s) read, "
            read += f"{done.bytes_read} bytes"
            if not done.continued:
                read += " (no state in --out: the whole journal)"
            if done.read_again_wholly:
                read += f"; read again wholly: {', '.join(done.read_again_wholly)}"
            progress.say(read)
        return
    if options.out_is_local:
        forget_state(_local_path(out))  # a windowed table cannot be continued
    source_options = {
        name: getattr(options, name)
        for name in ("since", "until", "epochs")
        if getattr(options, name)
    }
    replay_records.write_all(session, options.share, out, source_options)


def _local_path(out: str) -> str:
    return out.removeprefix("file://")


_TENURE_COLUMNS = (
    ("epoch", "long"), ("node", "string"), ("claimed_at", "timestamp"),
    ("from_time", "timestamp"), ("to_time", "timestamp"), ("last_seen", "timestamp"),
    ("how_ended", "string"), ("end_reason", "string"), ("records", "long"),
    ("fenced_records", "long"),
)  # fmt: skip
_GAP_COLUMNS = (
    ("after_epoch", "long"), ("before_epoch", "long"), ("from_node", "string"),
    ("to_node", "string"), ("from_time", "timestamp"), ("to_time", "timestamp"),
    ("duration_s", "double"), ("earliest_from", "timestamp"), ("longest_duration_s", "double"),
    ("cause", "string"),
)  # fmt: skip


def _tenure_rows(tenures: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [
        (t.epoch, t.node, _dt(t.claimed_unix_ns), _dt(t.serving_from_unix_ns),
         _dt(t.ended_unix_ns), _dt(t.last_seen_unix_ns), t.how_ended, t.end_reason,
         t.records, t.fenced_records)
        for t in tenures
    ]  # fmt: skip


def _gap_rows(gaps: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [
        (g.after_epoch, g.before_epoch, g.from_node, g.to_node, _dt(g.from_unix_ns),
         _dt(g.to_unix_ns), g.duration_s, _dt(g.earliest_from_unix_ns), g.longest_duration_s,
         g.cause)
        for g in gaps
    ]  # fmt: skip


def _write_rows(
    session: Any, path: str, rows: list[tuple[Any, ...]], columns: tuple[tuple[str, str], ...]
) -> None:
    schema = ", ".join(f"{name} {kind}" for name, kind in columns)
    session.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(path)


def _claims_in_range(claims: dict[int, Any], options: ReplayOptions) -> dict[int, Any]:
    """Epoch claims the replay is about: the chosen epochs, or all of them."""
    if not options.epochs:
        return claims
    chosen = {int(part) for part in options.epochs.split(",") if part.strip()}
    return {epoch: claim for epoch, claim in claims.items() if epoch in chosen}


def _counts(grouped: Any) -> dict[tuple[str, str | None], int]:
    return {(r["status"], r["type"]): r["count"] for r in grouped.count().collect()}


def _local_report_dir(out: str, progress: Any) -> Path:
    """Where the driver writes the report files: ``out`` itself unless it is a remote URL."""
    if "://" in out and not out.startswith("file://"):
        progress.say(f"{out} is remote; report.html and report.json go to the current directory")
        return Path.cwd()
    directory = Path(out.removeprefix("file://"))
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _dt(unix_ns: int | None) -> datetime | None:
    return None if unix_ns is None else datetime.fromtimestamp(unix_ns / 1e9, UTC)


def _iso(moment: datetime | None) -> str | None:
    """pyspark hands timestamps back as naive local times; say them in UTC."""
    return None if moment is None else moment.astimezone(UTC).isoformat()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="replay.py", description="Replay a primacy journal into Parquet tables and a report."
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        options = options_from_args(args)
    except OptionError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    try:
        run(options)
    except OutputBusy as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        from primacy.spark.journal_source import share_not_readable_in

        reason = share_not_readable_in(exc)
        if reason is None:
            raise
        print(f"replay: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
