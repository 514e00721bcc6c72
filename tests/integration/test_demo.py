"""The README's main command, as a user runs it."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_demo_fails_over_twice_and_loses_nothing() -> None:
    before = set(Path(tempfile.gettempdir()).glob("primacy-demo-*"))
    result = subprocess.run(
        [sys.executable, "-m", "primacy.cli", "demo"], capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert re.search(r"serving as master \d\.\d{3} s after the kill", out)
    assert re.search(r"serving as master \d\.\d{3} s after the SIGTERM", out)
    counts = re.search(r"acknowledged (\d+), consumed (\d+), lost (\d+)", out)
    assert counts is not None and int(counts[1]) > 0 and counts[3] == "0"
    assert "stored twice 0" in out
    assert set(Path(tempfile.gettempdir()).glob("primacy-demo-*")) == before  # cleaned up
