"""The suite's work units hold under pytest-xdist (tests/conftest.py, pyproject.toml).

Each test file is meant to run on one worker and every Spark test on one, so a module's
nodes and the one Spark session start once. Nothing fails when that silently stops: the
groups were ignored for a while (tests/conftest.py's hook ran after xdist's, and pytest
9.2 broke xdist's group suffix, pytest-dev/pytest-xdist#1386) and every run paid for more
sessions and more nodes than it needed. This notices it.
"""

from __future__ import annotations

import os

import pytest


def test_a_test_run_by_a_worker_carries_its_files_group(request: pytest.FixtureRequest) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ:
        pytest.skip("not on an xdist worker: there are no groups to check (`-n 0`)")
    if not request.config.getvalue("loadgroup"):
        pytest.skip("the run was not started with --dist loadgroup")
    assert request.node.nodeid.endswith("@tests/test_worker_groups.py"), request.node.nodeid
