"""What a machine without a C compiler gets: an install all in pure Python, and words saying so.

The build (.ci/build_backend.py) is run as pip runs it, on a copy of the source tree, with a
C compiler that always fails (``CC=false``) and with ``PRIMACY_COMPILE=0``: the wheel is made
either way, holds no compiled module, and the build's output says why.
"""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.compiled.sources import ROOT
from tests.install.wheelhouse import NOT_SOURCE, build_primacy_wheel

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


def test_an_editable_install_left_pure_removes_an_earlier_builds_extensions(
    tmp_path: Path,
) -> None:
    """``PRIMACY_COMPILE=0`` over a compiled editable install (or a module taken off the
    compiled list): the earlier build's extensions beside the sources would still be
    imported, and once stale would put the hot path on the source for good. The backend's
    editable build removes them."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=NOT_SOURCE)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    planted = [
        tree / "broker" / f"frames{suffix}",
        tree / "broker" / f"frames__mypyc{suffix}",
        tree / "store" / f"format{suffix}",
        tree / "broker" / f"config{suffix}",  # a module never on the list
    ]
    for path in planted:
        path.write_bytes(b"an earlier build")
    # pip's own editable install of the copy (build isolation, the backend as users get it),
    # into an environment of its own
    target = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    run = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"), "install",
         "--no-deps", "-v", "-e", str(tree)],
        env={**os.environ, "PRIMACY_COMPILE": "0"},
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert [path for path in planted if path.exists()] == []
    assert f"removed broker/frames{suffix}: not compiled by this build" in run.stdout + run.stderr
