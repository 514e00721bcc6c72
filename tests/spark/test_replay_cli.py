"""``primacy replay``: registers, checks arguments before Spark, explains what is missing, and
prints its progress while it runs (on the one real run of the command the Spark tests share,
``local_cli_replay`` in conftest.py)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from primacy.cli import replay as replay_cli
from primacy.store.recovery import recover
from tests.harness.cli import primacy
from tests.spark.journal_scenario import write_failover_journal
from tests.spark.local_run import CliReplay


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="primacy")
    replay_cli.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["replay", *argv])


def test_replay_registers_with_its_options() -> None:
    args = parse("/srv/share", "--out", "/tmp/o", "--since", "2026-01-01T00:00:00Z")
    assert (args.share, args.out, args.since, args.master) == (
        "/srv/share",
        "/tmp/o",
        "2026-01-01T00:00:00Z",
        None,
    )
    assert args.func is replay_cli.cmd_replay


def test_without_pyspark_it_says_how_to_install_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a)
    )
    assert replay_cli.cmd_replay(parse(str(tmp_path), "--out", str(tmp_path / "o"))) == 1
    assert "pip install 'primacy[spark]'" in capsys.readouterr().err


def test_without_java_it_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr("primacy.cli.replay.shutil.which", lambda name: None)
    assert replay_cli.cmd_replay(parse(str(tmp_path), "--out", str(tmp_path / "o"))) == 1
    assert "Java 17" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--since", "last tuesday"], "ISO 8601"), ([], "no journal/ directory")],
)
def test_bad_arguments_are_refused_before_spark_starts(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    message: str,
) -> None:
    monkeypatch.setattr(replay_cli, "missing_requirement", lambda: None)
    if extra:
        (tmp_path / "journal").mkdir()
    assert replay_cli.cmd_replay(parse(str(tmp_path), "--out", str(tmp_path / "o"), *extra)) == 2
    assert message in capsys.readouterr().err


def test_a_second_replay_into_the_same_out_stops_at_once(tmp_path: Path) -> None:
    pytest.importorskip("pyspark", reason="the [spark] extra is not installed")
    share, out = tmp_path / "share", tmp_path / "out"
    write_failover_journal(share)
    # The first run's lock, held by another process, as the nightly unit would hold it.
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_OUT, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        second = primacy(
            "replay",
            str(share),
            "--out",
            str(out),
            env={"JAVA_HOME": "", "PATH": _path_with_a_java(tmp_path)},
            timeout_s=120,  # bounds a hang only
        )
    finally:
        holder.kill()
        holder.wait()
    assert second.returncode == 1, second.stderr
    assert second.stderr.strip() == (
        f"primacy: PRIMACY-2705 another replay is writing {out} (it holds .replay.lock there); "
        "wait for it to finish, or give another --out"
    )  # Spark never started: nothing of its own on stderr
    assert sorted(p.name for p in out.iterdir()) == [".replay.lock"]


_HOLD_OUT = """
import sys
import time
from primacy.spark.replay_state import writing
with writing(sys.argv[1]):
    print("holding", flush=True)
    time.sleep(600)
"""


def _path_with_a_java(tmp_path: Path) -> str:
    """PATH with a ``java`` that fails if run: the command checks one is there, and must stop
    before it starts Spark."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\necho 'java must not run' >&2\nexit 99\n")
    java.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


STEP_NAMES = (
    "records: decoding every segment",
    "messages: pairing sends, deliveries and acks",
    "anomalies: damage, fences, duplicates, sequence gaps",
    "tenure and gaps: who was master when",
    "figures for the report",
    "report.html and report.json",
)
_STAGE = re.compile(r"replay:     stage \d+: \d+/\d+ tasks done, \d+ running")


@pytest.mark.slow
@pytest.mark.spark
def test_the_command_prints_each_step_as_it_runs_and_a_summary(local_cli_replay: CliReplay) -> None:
    share, out, lines = local_cli_replay.share, local_cli_replay.out, local_cli_replay.progress
    assert local_cli_replay.returncode == 0, "\n".join(lines)
    applied = recover(share / "journal", use_checkpoint=False, log=False).report.records_applied

    assert local_cli_replay.first_step_seen_running, (
        "the first step's line came only after the job finished"
    )
    assert "replay:" not in local_cli_replay.stdout  # progress goes to stderr only
    steps = [line for line in lines if not _STAGE.fullmatch(line)]
    in_step = False
    for line in lines:  # Spark's stage progress only while a step runs
        if _STAGE.fullmatch(line):
            assert in_step, f"{line!r} outside a step"
        elif line.startswith("replay: ["):
            in_step = line.endswith(" ...")
    assert steps[0] == f"replay: {share} -> {out} on local[*]"
    total = len(STEP_NAMES)
    durations = []
    for index, name in enumerate(STEP_NAMES, start=1):
        started, finished = steps[2 * index - 1], steps[2 * index]
        assert started == f"replay: [{index}/{total}] {name} ..."
        done = rf"replay: \[{index}/{total}\] {re.escape(name)} done in (\S+) s"
        match = re.fullmatch(done, finished)
        assert match, finished
        durations.append(float(match[1]))
    document = json.loads((out / "report.json").read_text())
    summary = re.fullmatch(
        r"replay: done in (\S+) s: (\d+) records, (\d+) failover\(s\), (\d+) gap\(s\), "
        rf"(\d+) anomaly row\(s\); tables and report in {re.escape(str(out))}",
        steps[-1],
    )
    assert summary, steps[-1]
    assert len(steps) == 2 + 2 * total
    assert float(summary[1]) >= sum(durations) - 0.1 * total  # each figure is rounded
    assert int(summary[2]) == document["records_ok"] == applied
    assert int(summary[3]) == len(document["failovers"]) == 3  # the scenario's three failovers
    assert int(summary[4]) == document["gaps"]["count"] == 3
    assert int(summary[5]) == sum(document["anomalies"].values()) == 4
