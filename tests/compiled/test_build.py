"""What a machine without a C compiler gets: an install all in pure Python, and words saying so.

The build (.ci/build_backend.py) is run as pip runs it, on a copy of the source tree, with a
C compiler that always fails (``CC=false``) and with ``PRIMACY_COMPILE=0``: the wheel is made
either way, holds no compiled module, and the build's output says why.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.install.wheelhouse import build_primacy_wheel

pytestmark = pytest.mark.slow


def _wheel(tmp_path: Path, **env: str) -> tuple[list[str], str]:
    """Build a wheel of a copy of the tree; its file names and the build's output."""
    wheel, output = build_primacy_wheel(tmp_path, tmp_path, verbose=True, **env)
    return zipfile.ZipFile(wheel).namelist(), output


def test_without_a_c_compiler_the_install_is_pure_python_and_says_so(tmp_path: Path) -> None:
    names, output = _wheel(tmp_path, CC="false")
    assert [name for name in names if name.endswith(".so")] == []
    # Under primacy-0.1.0.data/purelib/: the build had planned extensions when the wheel's
    # layout was chosen; pip installs it to the same place.
    assert any(name.endswith("purelib/primacy/broker/frames.py") for name in names)
    assert "the C build failed" in output and "every module in pure Python" in output


def test_primacy_compile_0_installs_pure_python(tmp_path: Path) -> None:
    names, output = _wheel(tmp_path, PRIMACY_COMPILE="0")
    assert [name for name in names if name.endswith(".so")] == []
    assert "PRIMACY_COMPILE=0: every module in pure Python" in output
