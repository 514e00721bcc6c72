"""The one Spark session the replay tests share: ``local[2]``, started once per test run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.spark.availability import skip_without_spark


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    skip_without_spark()
    from primacy.spark.replay import start_session

    session = start_session("local[2]")
    try:
        yield session
    finally:
        session.stop()
