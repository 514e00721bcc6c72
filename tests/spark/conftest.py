"""The one Spark session the replay tests share: ``local[2]``, started once per test run."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest


def java_is_missing() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return False
    return shutil.which("java") is None


def skip_without_spark() -> None:
    """Skip, saying why, where the [spark] extra or a JDK is missing."""
    pytest.importorskip("pyspark", reason="the [spark] extra is not installed")
    if java_is_missing():
        pytest.skip("Spark needs a JDK 17 and no java is on PATH or in JAVA_HOME")


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    skip_without_spark()
    from primacy.spark.replay import start_session

    session = start_session("local[2]")
    try:
        yield session
    finally:
        session.stop()
