"""The suite's work units hold under pytest-xdist (tests/conftest.py, pyproject.toml).

Each test file is meant to run on one worker and every Spark test on one, so a module's
nodes and the one Spark session start once. Nothing fails when that silently stops: the
groups were ignored for a while (tests/conftest.py's hook ran after xdist's, and pytest
9.2 broke xdist's group suffix, pytest-dev/pytest-xdist#1386) and every run paid for more
sessions and more nodes than it needed. This notices it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_a_test_run_by_a_worker_carries_its_files_group(request: pytest.FixtureRequest) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ:
        pytest.skip("not on an xdist worker: there are no groups to check (`-n 0`)")
    if not request.config.getvalue("loadgroup"):
        pytest.skip("the run was not started with --dist loadgroup")
    assert request.node.nodeid.endswith("@tests/test_worker_groups.py"), request.node.nodeid


def test_a_folders_conftest_fixtures_reach_its_files_given_around_another_folders_file() -> None:
    """pytest 9.1 lost tests/api/conftest.py's fixtures for the last file here ("fixture
    'master_snapshot' not found", pytest-dev/pytest#14971); tests/conftest.py gives pytest the
    arguments folder by folder. ``--setup-plan`` looks every fixture up and runs none."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         "--setup-plan",
         "tests/api/test_metrics.py::test_the_observed_families_count_what_the_node_feeds",
         "tests/test_worker_groups.py",
         "tests/api/test_status_snapshot.py::test_a_broker_figure_either_side_lacks_fails_loudly"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "not found" not in run.stdout
