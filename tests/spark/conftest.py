"""What the Spark tests share, each started once per test run: the ``local[2]`` session the
replay tests use, and one ``primacy replay`` of the failover journal run as a real process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.spark.availability import skip_without_spark
from tests.spark.local_run import CliReplay, driver_conf, replay_failover_journal


@pytest.fixture(scope="session")
def spark_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    skip_without_spark()
    from primacy.spark.replay import start_session

    # The JVM starts with the settings the real runs get (local_run.DRIVER_DEFAULTS: two
    # shuffle partitions, the quick compiler only; 105 -> 67 s of CPU for six replays).
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_CONF_DIR", str(driver_conf(tmp_path_factory.mktemp("spark-conf"))))
        session = start_session("local[2]")
    # No adaptive re-planning: its extra stages cost a replay of a few hundred records about
    # a quarter of its time, and no test here is about it; the real ``primacy replay`` runs
    # (local_run.py) keep Spark's planner as users have it.
    session.conf.set("spark.sql.adaptive.enabled", "false")
    # Nor Java code generated and compiled for each query: on a few hundred records compiling
    # costs more CPU than it saves; the interpreted operators compute the same rows.
    session.conf.set("spark.sql.codegen.wholeStage", "false")
    session.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def local_cli_replay(tmp_path_factory: pytest.TempPathFactory) -> CliReplay:
    """``primacy replay SHARE --out OUT`` on local[*] over the failover journal (local_run.py)."""
    skip_without_spark()
    return replay_failover_journal(tmp_path_factory.mktemp("local-cli-replay"))
