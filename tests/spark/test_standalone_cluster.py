"""The replay on a real Spark standalone cluster gives the tables the local replay gives (issue 18).

A master and two one-core workers from pyspark's own distribution
(tests/harness/spark_standalone.py), on loopback; the executors run a Python made for
the test with numpy, pyarrow and crc32c and no primacy, so everything they run
of ours comes in the code bundle. The same journal, written through failovers
with fenced and damaged records, is replayed three ways:

- ``primacy replay SHARE --out A --master spark://...``: the CLI ships the bundle;
- ``spark-submit --master spark://... --py-files primacy_replay.zip spark/replay.py
  SHARE --out B``: as docs/replay.md tells a cluster's users;
- ``primacy replay SHARE --out C``: the embedded ``local[*]`` session (the run the Spark
  tests share, ``local_cli_replay`` in conftest.py).

Every table (schema and sorted rows) and report.json (but its generation time)
must be the same in all three.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from primacy.spark.replay import TABLES, write_code_bundle
from tests.harness.spark_standalone import (
    StandaloneCluster,
    clean_environment,
    driver_process,
    finished,
    make_executor_venv,
    spark_home,
    standalone_cluster,
)
from tests.spark.availability import skip_without_spark
from tests.spark.local_run import PRIMACY, RUN_TIMEOUT_S, CliReplay, driver_conf

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The executors' interpreter: numpy, pyarrow and crc32c, no primacy; made once a session."""
    skip_without_spark()
    return make_executor_venv(tmp_path_factory.mktemp("executor-python") / "venv")


def sorted_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows in one order whatever the partitioning; nulls sort apart from values."""
    as_tuples = [tuple(row.values()) for row in rows]
    return sorted(as_tuples, key=lambda row: [(v is None, 0 if v is None else v) for v in row])


def replayed(out: Path) -> dict[str, Any]:
    """What a user reads from one replay: each table's schema and rows, and report.json."""
    result: dict[str, Any] = {}
    for name in TABLES:
        table = pq.read_table(out / name)
        result[name] = (table.schema, sorted_rows(table.to_pylist()))
    report = json.loads((out / "report.json").read_text())
    report.pop("generated_at")
    result["report.json"] = report
    return result


def assert_ran(run: subprocess.CompletedProcess[str], what: str) -> None:
    assert run.returncode == 0, f"{what} exited {run.returncode}:\n{run.stdout[-8000:]}"


def wait_for_completed_apps(cluster: StandaloneCluster, count: int) -> list[dict[str, Any]]:
    """The master's list of finished applications, once it holds ``count`` of them."""
    cluster.wait_for(
        lambda: len(cluster.completed_apps()) == count, f"{count} completed app(s)", 60.0
    )
    return cluster.completed_apps()


def test_a_two_worker_cluster_replays_the_journal_as_the_local_session_does(
    tmp_path: Path, executor_python: Path, local_cli_replay: CliReplay
) -> None:
    probe = subprocess.run(
        [str(executor_python), "-c", "import primacy"],
        env=clean_environment(),
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0, "the executors' Python must not have primacy"
    assert "No module named 'primacy'" in probe.stderr, probe.stderr

    # The local run: the one the Spark tests share (its progress lines are test_replay_cli's).
    local = local_cli_replay
    assert local.returncode == 0, "\n".join(local.progress)
    assert local.progress[0].endswith(" on local[*]"), local.progress[0]
    share = local.share
    outs = {name: tmp_path / f"out-{name}" for name in ("cli", "submit")}
    bundle = write_code_bundle(tmp_path / "primacy_replay.zip")
    with standalone_cluster(tmp_path / "cluster", workers=2) as cluster:
        on_cluster = clean_environment(
            SPARK_CONF_DIR=str(driver_conf(tmp_path / "driver-conf")),
            PYSPARK_PYTHON=str(executor_python),
        )
        # Both drivers start at once: the second starts its JVM and plans while the first
        # runs; its executors wait for the workers' one core each, so each application still
        # gets an executor on both workers.
        with (
            driver_process(
                [str(PRIMACY), "replay", str(share), "--out", str(outs["cli"]),
                 "--master", cluster.master_url],
                on_cluster,
                tmp_path / "cli.log",
            ) as cli_process,
            driver_process(
                [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.master_url,
                 "--py-files", str(bundle), str(ROOT / "spark" / "replay.py"), str(share),
                 "--out", str(outs["submit"])],
                # The driver's Python has pyspark and the report's pandas and matplotlib.
                {**on_cluster, "PYSPARK_DRIVER_PYTHON": sys.executable},
                tmp_path / "submit.log",
            ) as submit_process,
        ):  # fmt: skip
            cli = finished(cli_process, tmp_path / "cli.log", RUN_TIMEOUT_S)
            submitted = finished(submit_process, tmp_path / "submit.log", RUN_TIMEOUT_S)
        assert_ran(cli, "primacy replay --master")
        assert f"on {cluster.master_url}" in cli.stdout
        assert_ran(submitted, "spark-submit spark/replay.py")
        apps = wait_for_completed_apps(cluster, 2)

    # Both ran as applications of this master, each with an executor on both workers.
    assert [app["name"] for app in apps] == ["primacy-replay"] * 2, apps
    for app in apps:
        for worker in ("worker-0", "worker-1"):
            assert (tmp_path / "cluster" / worker / app["id"]).is_dir(), (worker, app)

    expected = replayed(local.out)
    schema, records = expected["records"]
    statuses = {row[schema.get_field_index("status")] for row in records}
    assert {"ok", "fenced", "damaged_batch"} <= statuses  # the scenario's damage is in it
    assert len(expected["tenure"][1]) == 4 and len(expected["gaps"][1]) == 3
    for run in ("cli", "submit"):
        got = replayed(outs[run])
        for name in TABLES:
            schema, rows = got[name]
            assert schema.equals(expected[name][0], check_metadata=True), (run, name, schema)
            assert rows == expected[name][1], f"{run}: table {name} differs from local[*]'s"
        assert got["report.json"] == expected["report.json"], run
