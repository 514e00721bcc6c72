"""The README's main command, as a user runs it."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from tests.harness.cli import primacy

pytestmark = pytest.mark.slow


def test_demo_fails_over_twice_and_loses_nothing() -> None:
    before = set(Path(tempfile.gettempdir()).glob("primacy-demo-*"))
    result = primacy("demo", timeout_s=180)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert re.search(r"serving as master \d\.\d{3} s after the kill", out)
    assert re.search(r"serving as master \d\.\d{3} s after the SIGTERM", out)
    counts = re.search(r"acknowledged (\d+), consumed (\d+), lost (\d+)", out)
    assert counts is not None and int(counts[1]) > 0 and counts[3] == "0"
    assert "stored twice 0" in out
    # Every node is on this kernel, under this user: the dead master is not waited out, and
    # the explanation says so (not the takeover wait a node across hosts keeps).
    words = " ".join(out.split())  # the explanation is wrapped
    assert "Why so quick after a crash" in words and "no claim to wait out" in words, out
    assert set(Path(tempfile.gettempdir()).glob("primacy-demo-*")) == before  # cleaned up
