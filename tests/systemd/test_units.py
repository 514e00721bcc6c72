"""The unit files: systemd-analyze verify and security pass; they agree with the profiles."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from primacy.nfs_profiles.fstab import mount_unit, mount_unit_name
from primacy.nfs_profiles.profiles import load_profile
from primacy.supervisor.config import load_config

REPO = Path(__file__).resolve().parents[2]
SYSTEMD_DIR = REPO / "systemd"
PRIMACY_BIN = "/usr/local/bin/primacy"
MAX_EXPOSURE = 3.0
SERVICES = ("primacy@.service", "primacy-exec@.service", "primacy-replay@.service")
UNITS = (*SERVICES, "primacy-replay@.timer")

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed on this machine"
)


def instance(unit: str, group: str = "orders") -> str:
    return unit.replace("@.", f"@{group}.")


@pytest.fixture
def unit_dir(tmp_path: Path) -> Path:
    """Copies of the units whose ExecStart= points at a real executable (verify checks it)."""
    stub = shutil.which("true")
    assert stub is not None
    for unit in UNITS:
        text = (SYSTEMD_DIR / unit).read_text()
        (tmp_path / unit).write_text(text.replace(PRIMACY_BIN, stub))
    return tmp_path


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE is not None
    return subprocess.run(
        [SYSTEMD_ANALYZE, *args], capture_output=True, text=True, timeout=60, check=False
    )


@needs_systemd_analyze
def test_units_verify_cleanly(unit_dir: Path) -> None:
    result = analyze("verify", "--man=no", *(str(unit_dir / instance(unit)) for unit in UNITS))
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", f"systemd-analyze verify warns:\n{result.stderr}"


@needs_systemd_analyze
def test_verify_catches_a_broken_unit(unit_dir: Path) -> None:
    """The check above can fail: a missing ExecStart binary is an error."""
    unit = unit_dir / "primacy@.service"
    unit.write_text(unit.read_text().replace(shutil.which("true") or "", "/nonexistent/primacy"))
    result = analyze("verify", "--man=no", str(unit_dir / "primacy@orders.service"))
    assert result.returncode != 0


@needs_systemd_analyze
@pytest.mark.parametrize("unit", SERVICES)
def test_security_exposure_is_at_most_3(
    unit_dir: Path, unit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = analyze("security", "--offline=true", "--no-pager", str(unit_dir / instance(unit)))
    assert result.returncode == 0, result.stderr
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+) (\w+)", result.stdout)
    assert match, result.stdout
    exposure = float(match.group(1))
    with capsys.disabled():  # the figure belongs in every run's output, passing or not
        print(f"\n{instance(unit)}: overall exposure level {exposure} {match.group(2)}")
    assert exposure <= MAX_EXPOSURE


@needs_systemd_analyze
@pytest.mark.parametrize(
    ("profile", "source"),
    [("nfs4", "nas1:/export/primacy"), ("cifs", "//nas1/primacy"), ("gfs2", "/dev/vg/primacy")],
)
def test_generated_mount_units_verify(tmp_path: Path, profile: str, source: str) -> None:
    where = "/srv/primacy/orders"
    path = tmp_path / mount_unit_name(where)
    path.write_text(mount_unit(load_profile(profile), source, where))
    result = analyze("verify", "--man=no", str(path))
    assert result.returncode == 0, result.stderr
    assert "Unknown" not in result.stderr and "Invalid" not in result.stderr, result.stderr


def read_unit(unit: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(SYSTEMD_DIR / unit)
    return parser


def test_node_unit_matches_the_conventions() -> None:
    unit = read_unit("primacy@.service")
    service = unit["Service"]
    assert service["Type"] == "notify"
    assert service["NotifyAccess"] == "main"
    assert service["ExecStart"].startswith(f"{PRIMACY_BIN} run --config /etc/primacy/%i.toml")
    assert unit["Unit"]["RequiresMountsFor"] == "/srv/primacy/%i"
    assert service["ReadWritePaths"] == "/srv/primacy/%i"
    assert service["Restart"] == "on-failure"
    assert service["User"] == "primacy"
    # The node arms the watchdog itself from its config (sdnotify.Notifier); a WatchdogSec=
    # here would win over the watchdog_s derived from its keepalive.
    assert "WatchdogSec" not in service


@pytest.mark.parametrize("name", ["local", "nfs4", "gfs2", "cifs"])
def test_each_profile_s_watchdog_is_a_config_key_that_reaches_systemd(name: str) -> None:
    timings = load_profile(name).timings
    settings = {
        "node_id": "a",
        "share": "/srv",
        "lock_acquire_sleep_interval_ms": timings.lock_acquire_sleep_interval_ms,
        "lock_keep_alive_period_ms": timings.lock_keep_alive_period_ms,
    }
    derived = load_config(None, settings).watchdog_timeout_s
    assert load_config(None, {**settings, "watchdog_s": timings.watchdog_s}).watchdog_timeout_s == (
        timings.watchdog_s
    )
    if name in ("local", "nfs4"):  # the derivation alone gives what these profiles want
        assert derived == timings.watchdog_s
    else:  # these want more, which `primacy doctor` prints as a watchdog_s to set
        assert derived is not None and derived < timings.watchdog_s


def test_timer_starts_the_replay_nightly() -> None:
    timer = read_unit("primacy-replay@.timer")["Timer"]
    assert re.fullmatch(r"\*-\*-\* \d\d:\d\d:00", timer["OnCalendar"])
    assert timer["Persistent"] == "true"
    assert "replay" in read_unit("primacy-replay@.service")["Service"]["ExecStart"]


def test_example_group_config_loads_and_fits_the_nfs4_profile() -> None:
    config = load_config(SYSTEMD_DIR / "example-group.toml", {})
    nfs4 = load_profile("nfs4")
    assert config.lock_method == nfs4.lock_method
    assert config.lock_acquire_sleep_interval_ms == nfs4.timings.lock_acquire_sleep_interval_ms
    assert config.lock_keep_alive_period_ms == nfs4.timings.lock_keep_alive_period_ms
    assert config.stall_takeover_ms == nfs4.timings.stall_takeover_ms > 0
    assert str(config.share) == "/srv/primacy/GROUP"
    assert config.watchdog_timeout_s == nfs4.timings.watchdog_s


def test_the_exec_unit_lets_a_jvm_run_and_stops_after_the_brokers_grace() -> None:
    node, exec_mode = read_unit("primacy@.service")["Service"], read_unit("primacy-exec@.service")
    service = exec_mode["Service"]
    assert "MemoryDenyWriteExecute" not in service  # a JIT writes code it then runs
    assert "@resources" not in service["SystemCallFilter"]
    assert service["KillMode"] == "mixed"  # the supervisor orders the broker's stop
    assert "WatchdogSec" not in service  # the node's watchdog_s, as in primacy@.service
    grace_s = load_config(None, {"node_id": "a", "share": "/srv"}).exec_stop_grace_ms / 1000
    assert int(service["TimeoutStopSec"].rstrip("s")) >= grace_s + 10
    for key in ("Type", "NotifyAccess", "ExecStart", "User", "ReadWritePaths", "Restart"):
        assert service[key] == node[key], key
