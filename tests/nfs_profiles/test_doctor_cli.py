"""``primacy doctor`` through its argument parser and exit codes (systemd: tests/systemd/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from primacy.cli import doctor as doctor_cli
from primacy.nfs_profiles import codes
from tests.nfs_profiles import mountinfo_samples as samples

REPO = Path(__file__).resolve().parents[2]


def mount_table_with_share_at(tmp_path: Path, sample: str) -> tuple[Path, Path]:
    """A mountinfo file whose share line is mounted on a real directory under tmp_path."""
    share = tmp_path / "srv primacy"
    (share / "orders").mkdir(parents=True)
    escaped = str(share).replace(" ", "\\040")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(samples.BASE + sample.replace(" /srv/primacy ", f" {escaped} ", 1))
    return mountinfo, share / "orders"


def test_doctor_on_a_real_directory_exits_0_with_round_trips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert doctor_cli.main(["doctor", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "ok"
    subjects = [finding["subject"] for finding in report["findings"]]
    assert "fsync round trip" in subjects
    assert f"lock round trip ({report['profile']['lock_method']})" in subjects


@pytest.mark.parametrize(
    ("sample", "exit_code", "code"),
    [
        (samples.NFS4_RECOMMENDED, 0, None),
        (samples.NFS4_DISTRIBUTION_DEFAULTS, 1, codes.OPTION_NOT_RECOMMENDED),
        (samples.NFS3_NOLOCK, 2, codes.OPTION_REFUSED),
        (samples.OCFS2, 2, codes.FILESYSTEM_REFUSED),
    ],
)
def test_doctor_exit_codes_follow_the_verdict(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sample: str,
    exit_code: int,
    code: str | None,
) -> None:
    mountinfo, path = mount_table_with_share_at(tmp_path, sample)
    argv = ["doctor", str(path), "--mountinfo", str(mountinfo), "--no-round-trips"]
    assert doctor_cli.main(argv) == exit_code
    out = capsys.readouterr().out
    assert f"verdict: {['ok', 'warning', 'refused'][exit_code]} (exit {exit_code})" in out
    assert "round trip" not in out
    if code is not None:
        assert code in out


def test_doctor_as_a_module_process(tmp_path: Path) -> None:
    mountinfo, path = mount_table_with_share_at(tmp_path, samples.NFS3)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "primacy.cli.doctor",
            "doctor",
            str(path),
            "--json",
            "--mountinfo",
            str(mountinfo),
            "--no-round-trips",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    report = json.loads(result.stdout)
    assert report["mount"]["mount_point"] == str(path.parent)
    assert {"code": codes.OPTION_REFUSED, "subject": "vers=3"}.items() <= next(
        finding for finding in report["findings"] if finding["subject"] == "vers=3"
    ).items()


def test_fstab_prints_line_and_mount_unit(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["doctor", "--fstab", "nas1:/export/primacy", "/srv/primacy/orders"]
    assert doctor_cli.main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "nas1:/export/primacy  /srv/primacy/orders  nfs4  "
        "vers=4.2,soft,timeo=20,retrans=2,lookupcache=none,sync,intr,proto=tcp,_netdev  0  0"
    ) in out.splitlines()
    assert "# /etc/systemd/system/srv-primacy-orders.mount" in out
    assert "Where=/srv/primacy/orders" in out


def test_fstab_json_for_gfs2(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["doctor", "--fstab", "/dev/vg_shared/primacy", "/srv/primacy", "--profile", "gfs2"]
    assert doctor_cli.main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["fstab"] == "/dev/vg_shared/primacy  /srv/primacy  gfs2  noatime,_netdev  0  0"
    assert report["mount_unit_name"] == "srv-primacy.mount"
    assert "Wants=dlm.service" in report["mount_unit"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["doctor", "--fstab", "nas1-no-colon", "/srv/p"], "is not SERVER:/export"),
        (["doctor", "--fstab", "nas1:/e", "relative/p"], "must be an absolute path"),
        (["doctor", "/srv", "--fstab", "nas1:/e", "/srv/p"], "not both"),
        (["doctor"], "give the share directory"),
        (["doctor", "/srv", "--profile", "gfs2"], "--profile applies to --fstab"),
    ],
)
def test_usage_errors_exit_64(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert doctor_cli.main(argv) == 64
    assert message in capsys.readouterr().err
