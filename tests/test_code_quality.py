"""ruff (lint and format) and mypy, run as part of the test command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_lint_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


# Checked under the names they install as: imports say ``primacy.store``, so mypy must see a
# ``primacy/`` package (an editable install's import hook is invisible to it).


def test_mypy_strict_on_every_package(tmp_path: Path) -> None:
    namespace = tmp_path / "primacy"
    namespace.mkdir()
    for package in PACKAGES:
        (namespace / package).symlink_to(ROOT / package, target_is_directory=True)
    packages = [arg for package in PACKAGES for arg in ("-p", f"primacy.{package}")]
    result = subprocess.run(
        [str(BIN / "mypy"), "--config-file", str(ROOT / "pyproject.toml"), *packages],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues found in" in result.stdout, result.stdout
