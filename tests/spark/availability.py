"""Whether Spark can run here: the [spark] extra and a JDK. A plain module, not a conftest,
so that test modules may import it."""

from __future__ import annotations

import os
import shutil

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
