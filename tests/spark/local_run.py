"""One ``primacy replay`` of the failover journal on ``local[*]``, run as a user runs it.

A real process of the installed command, its stderr read line by line while it
runs. Several tests look at the one run (``local_cli_replay`` in conftest.py):
test_replay_cli.py at its progress lines, test_standalone_cluster.py at its
tables, which the cluster's runs must equal.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from tests.harness.jvm import SHORT_LIVED_JVM
from tests.harness.spark_standalone import clean_environment
from tests.spark.journal_scenario import write_failover_journal

PRIMACY = Path(sys.executable).parent / "primacy"  # the installed command, as users run it
RUN_TIMEOUT_S = 600.0  # bounds a hang only
# Small JVMs: two cores run the master, two workers, two drivers and two executors at once.
# Two shuffle partitions for journals of a few hundred records, one per core (Spark's 200 cost
# each run about 10 s here). Every run compared with another gets the same settings.
DRIVER_DEFAULTS = f"""\
spark.driver.memory 512m
spark.executor.memory 512m
spark.driver.extraJavaOptions {SHORT_LIVED_JVM}
spark.executor.extraJavaOptions {SHORT_LIVED_JVM}
spark.sql.shuffle.partitions 2
spark.ui.enabled false
"""


def driver_conf(directory: Path) -> Path:
    """A SPARK_CONF_DIR holding DRIVER_DEFAULTS (and no site defaults)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "spark-defaults.conf").write_text(DRIVER_DEFAULTS)
    return directory


@dataclass(frozen=True)
class CliReplay:
    """What ``primacy replay SHARE --out OUT`` did and printed."""

    share: Path
    out: Path
    returncode: int
    progress: list[str]  # stderr's "replay: " lines in order (not the JVM's own warnings)
    stdout: str
    # Whether the first step's line came while the process ran and before the report existed.
    first_step_seen_running: bool


def replay_failover_journal(root: Path) -> CliReplay:
    """Write the failover journal under ``root`` and replay it with the command."""
    share, out = root / "share", root / "out"
    write_failover_journal(share)
    stdout_path = root / "stdout"
    with open(stdout_path, "wb") as stdout:
        process = subprocess.Popen(
            [str(PRIMACY), "replay", str(share), "--out", str(out)],
            stdout=stdout,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=clean_environment(SPARK_CONF_DIR=str(driver_conf(root / "driver-conf"))),
            text=True,
        )
    watchdog = threading.Timer(RUN_TIMEOUT_S, process.kill)
    watchdog.start()
    lines: list[str] = []
    first_step_seen_running: bool | None = None
    try:
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.rstrip("\n")
            if not line.startswith("replay: "):
                continue  # the JVM's own warnings
            if first_step_seen_running is None and line.startswith("replay: [1/"):
                # Streamed while the job runs: the report is written by the last step.
                first_step_seen_running = (
                    process.poll() is None and not (out / "report.json").exists()
                )
            lines.append(line)
        returncode = process.wait()
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
    return CliReplay(
        share, out, returncode, lines, stdout_path.read_text(), bool(first_step_seen_running)
    )
