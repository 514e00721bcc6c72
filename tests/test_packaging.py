"""What ``pip install`` puts into a user's environment: one ``primacy`` package and its metadata."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = PACKAGES

pytestmark = pytest.mark.slow


def test_the_wheel_installs_everything_under_one_primacy_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), "."],
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("primacy-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {
        "primacy",
        wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info",
    }
    for folder in FOLDERS:
        assert f"primacy/{folder}/__init__.py" in names, folder
    assert "primacy/nfs_profiles/nfs4.toml" in names
    # What a host needs besides the code: the units `primacy systemd install` writes, and
    # the ActiveMQ gate's source (tests/install/ installs the wheel and uses them)
    for unit in ("primacy@.service", "primacy-exec@.service", "primacy-replay@.timer"):
        assert f"primacy/systemd/{unit}" in names
    assert "primacy/systemd/example-group.toml" in names
    assert "primacy/supervisor/child/activemq/PrimacyGateLocker.java" in names
    entry_points = zipfile.ZipFile(wheel).read(
        next(name for name in names if name.endswith("entry_points.txt"))
    )
    assert b"primacy = primacy.cli.main:main" in entry_points
