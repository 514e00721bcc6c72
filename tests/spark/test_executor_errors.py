"""What an executor is given and what it says when it cannot read the share.

An executor opens each segment by the path the driver planned. Where the share
is not mounted at that path, the task must fail saying which host and what to
do, not yield nothing (which would end the job with empty tables); a segment
that retention removed after planning, on a host that has the share, is still
no error. The code bundle shipped to executors without primacy must hold every
``primacy`` module its modules import. The command line turns the failure
into one line (one test runs Spark, with its Python workers kept from the share).
"""

from __future__ import annotations

import ast
import os
import shutil
import socket
import sys
import zipfile
from pathlib import Path

import pytest

from primacy.spark.journal_plan import SegmentPlan
from primacy.spark.journal_source import (
    JournalReader,
    SegmentPartition,
    ShareNotReadable,
)
from primacy.spark.replay import write_code_bundle
from primacy.store.segments import segment_name
from tests.harness.cli import primacy
from tests.spark.availability import skip_without_spark
from tests.spark.journal_scenario import write_failover_journal
from tests.spark.local_run import driver_conf


def plan_for(path: Path) -> SegmentPlan:
    return SegmentPlan(
        path=str(path), epoch=1, first_sequence=1, fence_limit=None, is_epoch_tail=True,
        size_bytes=4096,
    )  # fmt: skip


def test_a_share_missing_on_the_executor_fails_the_task_naming_the_host_and_path(
    tmp_path: Path,
) -> None:
    segment = tmp_path / "not-mounted" / "journal" / segment_name(1, 1)
    reader = JournalReader(str(tmp_path / "not-mounted"), {})
    with pytest.raises(ShareNotReadable) as raised:
        list(reader.read(SegmentPartition(plan_for(segment))))
    message = str(raised.value)
    assert message.startswith(
        f"segment {segment} is not readable on executor host {socket.gethostname()}: "
    )
    assert "No such file or directory" in message  # the reason, as the OS gave it
    assert message.endswith("; mount the share at the same path on every executor (docs/replay.md)")


def test_a_share_path_that_is_a_file_is_not_a_share_either(tmp_path: Path) -> None:
    (tmp_path / "journal").write_text("not a directory")
    segment = tmp_path / "journal" / segment_name(1, 1)
    with pytest.raises(ShareNotReadable, match=f"executor host {socket.gethostname()}"):
        list(JournalReader(str(tmp_path), {}).read(SegmentPartition(plan_for(segment))))


def test_a_segment_removed_by_retention_after_planning_reads_as_nothing(tmp_path: Path) -> None:
    (tmp_path / "journal").mkdir()
    segment = tmp_path / "journal" / segment_name(1, 1)
    assert list(JournalReader(str(tmp_path), {}).read(SegmentPartition(plan_for(segment)))) == []


def test_a_mounted_share_reads_as_before(tmp_path: Path) -> None:
    written = write_failover_journal(tmp_path / "share")
    reader = JournalReader(str(written.share), {})
    rows = sum(
        batch.num_rows for partition in reader.partitions() for batch in reader.read(partition)
    )
    assert rows > len(written.sends)


def _primacy_imports(source: str) -> set[str]:
    """Every ``primacy.…`` module a source names, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            # ``from primacy.store import format``: format may be a module of the package.
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name.split(".")[0] == "primacy"}


def test_the_code_bundle_holds_every_primacy_module_its_modules_import(tmp_path: Path) -> None:
    with zipfile.ZipFile(write_code_bundle(tmp_path / "bundle.zip")) as bundle:
        files = set(bundle.namelist())
        sources = {name: bundle.read(name).decode() for name in files if name.endswith(".py")}
    modules = {
        name.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for name in files
    }
    # What executors import: the data source's module, which the driver's registration names.
    assert {"primacy", "primacy.spark", "primacy.spark.journal_source", "primacy.store"} <= modules
    missing = set()
    for name, source in sources.items():
        for imported in _primacy_imports(source):
            package_or_module = imported in modules
            a_name_in_a_module = imported.rsplit(".", 1)[0] in modules and (
                imported.rsplit(".", 1)[0] != "primacy"
            )
            if not package_or_module and not a_name_in_a_module:
                missing.add(f"{name} imports {imported}")
    assert sorted(missing) == []


# An executor's Python in a mount namespace of its own where the share's path is an empty
# tmpfs: the share "not mounted there", while the driver (the JVM and the CLI) sees it.
_EXECUTOR_WITHOUT_THE_SHARE = """#!/bin/sh
exec unshare --mount --propagation private \\
    sh -c 'mount -t tmpfs none "$0" && exec "$@"' {share} {python} "$@"
"""


@pytest.mark.slow
@pytest.mark.spark
def test_the_cli_says_in_one_line_which_host_cannot_read_the_share(tmp_path: Path) -> None:
    skip_without_spark()
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("hiding the share from Spark's Python workers needs root and unshare")
    share, out = tmp_path / "share", tmp_path / "out"
    write_failover_journal(share)
    executor_python = tmp_path / "executor-python"
    executor_python.write_text(
        _EXECUTOR_WITHOUT_THE_SHARE.format(share=share, python=sys.executable)
    )
    executor_python.chmod(0o755)

    finished = primacy(
        "replay",
        str(share),
        "--out",
        str(out),
        "--quiet",
        env={
            "PYSPARK_PYTHON": str(executor_python),
            "SPARK_CONF_DIR": str(driver_conf(tmp_path / "driver-conf")),
        },
        timeout_s=600,  # bounds a hang only
    )

    assert finished.returncode == 1, finished.stderr[-3000:]
    ours = [line for line in finished.stderr.splitlines() if line.startswith("primacy: ")]
    assert len(ours) == 1, finished.stderr[-3000:]
    assert ours[0].startswith(f"primacy: PRIMACY-2704 segment {share}/journal/")
    assert f"is not readable on executor host {socket.gethostname()}: " in ours[0]
    assert ours[0].endswith("mount the share at the same path on every executor (docs/replay.md)")
    # Spark logs the executor's traceback itself; the CLI raises none of its own after it.
    assert finished.stderr.rstrip().splitlines()[-1] == ours[0]
    assert "Py4JJavaError" not in finished.stderr
    assert not (out / "report.json").exists()
