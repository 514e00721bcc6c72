"""``primacy systemd install|uninstall``: the units run this installation's binary, the
operator's files are kept. (From an installed wheel, as root: tests/install/.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from primacy.cli import doctor as doctor_cli
from primacy.cli import systemd_units
from primacy.nfs_profiles import codes

REPO = Path(__file__).resolve().parents[2]
SERVICES = ("primacy@.service", "primacy-exec@.service", "primacy-replay@.service")


def _exec_start(unit: Path) -> str:
    (line,) = (x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    return line


def test_the_units_run_the_primacy_of_the_installation_that_wrote_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert doctor_cli.main(["systemd", "install", "--prefix", str(tmp_path)]) == 0
    unit_dir = tmp_path / "etc/systemd/system"
    assert sorted(p.name for p in unit_dir.iterdir()) == sorted(systemd_units.UNIT_FILES)
    binary = Path(sys.executable).parent / "primacy"  # this virtualenv's script
    assert systemd_units.installed_binary() == binary
    for service in SERVICES:
        shipped = (REPO / "systemd" / service).read_text()
        written = (unit_dir / service).read_text()
        assert _exec_start(unit_dir / service).startswith(f"ExecStart={binary} ")
        # Only the binary differs from what ships.
        assert written == shipped.replace(
            f"ExecStart={systemd_units.PLACEHOLDER_BINARY} ", f"ExecStart={binary} "
        )
    timer = "primacy-replay@.timer"
    assert (unit_dir / timer).read_bytes() == (REPO / "systemd" / timer).read_bytes()
    assert f"the units run {binary} as the user primacy" in capsys.readouterr().out


def test_binary_names_another_primacy(tmp_path: Path) -> None:
    binary = tmp_path / "opt/primacy/bin/primacy"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    argv = ["systemd", "install", "--prefix", str(tmp_path / "root"), "--binary", str(binary)]
    assert doctor_cli.main(argv) == 0
    unit = tmp_path / "root/etc/systemd/system/primacy@.service"
    assert _exec_start(unit) == (
        f"ExecStart={binary} run --config /etc/primacy/%i.toml $PRIMACY_RUN_ARGS"
    )


@pytest.mark.parametrize(
    ("binary", "says"),
    [
        ("/nonexistent/bin/primacy", "does not exist"),
        ("/opt/my primacy/bin/primacy", "cannot stand in a unit's ExecStart="),
        ("/opt/%i/bin/primacy", "cannot stand in a unit's ExecStart="),
        ("bin/primacy", "cannot stand in a unit's ExecStart="),
    ],
)
def test_a_binary_the_units_cannot_run_is_refused_with_a_code(
    tmp_path: Path, binary: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["systemd", "install", "--prefix", str(tmp_path), "--binary", binary]
    assert doctor_cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{codes.SYSTEMD_BINARY_UNUSABLE} ") and says in err, err
    assert not (tmp_path / "etc").exists()


def test_the_operator_s_files_are_installed_once_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert doctor_cli.main(["systemd", "install", "--prefix", str(tmp_path)]) == 0
    unit_dir = tmp_path / "etc/systemd/system"
    env_file = tmp_path / "etc/default/primacy"
    env_file.write_text("PRIMACY_RUN_ARGS=--log-level debug\n")
    assert doctor_cli.main(["systemd", "install", "--prefix", str(tmp_path)]) == 0
    assert env_file.read_text() == "PRIMACY_RUN_ARGS=--log-level debug\n", "config overwritten"
    assert f"{codes.SYSTEMD_INSTALLED} kept {env_file}" in capsys.readouterr().out

    assert doctor_cli.main(["systemd", "uninstall", "--prefix", str(tmp_path)]) == 0
    assert list(unit_dir.iterdir()) == []
    assert env_file.exists()
    assert (tmp_path / "etc/primacy/example-group.toml").exists()


def test_systemd_install_without_unit_files_says_how(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["systemd", "install", "--prefix", str(tmp_path), "--source", str(tmp_path / "none")]
    assert doctor_cli.main(argv) == 1
    assert codes.SYSTEMD_SOURCE_MISSING in capsys.readouterr().err
    assert not (tmp_path / "etc").exists()
