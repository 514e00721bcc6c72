"""The doctor against recorded mount tables (pyfakefs) and against this machine's real one."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from pyfakefs.fake_filesystem import FakeFilesystem

from primacy import nfs_profiles
from primacy.locker.probe import check_share
from primacy.nfs_profiles import codes
from primacy.nfs_profiles import doctor as doctor_module
from primacy.nfs_profiles.doctor import Diagnosis, Severity, check_for_run, diagnose, render_text
from primacy.share.posix_lock import LockMethod
from tests.harness.cli import primacy
from tests.nfs_profiles import mountinfo_samples as samples

SHARE = "/srv/primacy/orders"
PROFILE_DIR = Path(nfs_profiles.__file__).parent


def doctor_on(fs: FakeFilesystem, share_line: str, path: str = SHARE) -> Diagnosis:
    """Run the doctor on ``path`` in a fake host whose mount table is BASE plus ``share_line``."""
    fs.add_real_directory(PROFILE_DIR)
    fs.create_file("/proc/self/mountinfo", contents=samples.BASE + share_line)
    create_share(fs, path, perm_bits=0o770)  # a share only primacy's group can write
    return diagnose(Path(path))


def create_share(fs: FakeFilesystem, path: str = SHARE, perm_bits: int = 0o777) -> None:
    """The share's directory on the fake host, above it directories as a real host has them
    (pyfakefs makes them 0777, which the doctor flags: anyone could rename the share)."""
    fs.create_dir(path, perm_bits=perm_bits)
    for parent in Path(path).parents:
        os.chmod(parent, 0o755)


def problems(diagnosis: Diagnosis) -> set[tuple[str | None, str]]:
    return {(finding.code, finding.subject) for finding in diagnosis.problems}


R, W = codes.OPTION_REFUSED, codes.OPTION_NOT_RECOMMENDED

CASES = {
    "nfs4 as recommended": (samples.NFS4_RECOMMENDED, "nfs4", Severity.OK, set()),
    "nfs4.1 over IPv6": (samples.NFS4_IPV6_VERS41, "nfs4", Severity.OK, set()),
    "nfs4 with distribution defaults": (
        samples.NFS4_DISTRIBUTION_DEFAULTS,
        "nfs4",
        Severity.WARNING,
        {(W, "soft"), (W, "timeo=20"), (W, "lookupcache=none"), (W, "sync")},
    ),
    "nfs4.0 with lookupcache=pos": (
        samples.NFS40_LOOKUPCACHE_POS,
        "nfs4",
        Severity.WARNING,
        {(W, "vers=4.2"), (W, "lookupcache=none"), (codes.OPTION_DISCOURAGED, "lookupcache=pos")},
    ),
    "nfs3": (
        samples.NFS3,
        "nfs4",
        Severity.REFUSED,
        {(R, "vers=3"), (W, "soft"), (W, "timeo=20"), (W, "lookupcache=none"), (W, "sync")},
    ),
    "nfs3 with nolock": (
        samples.NFS3_NOLOCK,
        "nfs4",
        Severity.REFUSED,
        {(R, "vers=3"), (R, "nolock"), (R, "local_lock=all"), (W, "lookupcache=none"), (W, "sync")},
    ),
    "nfs4 with local_lock=flock": (
        samples.NFS4_LOCAL_LOCK_FLOCK,
        "nfs4",
        Severity.REFUSED,
        {(R, "local_lock=flock")},
    ),
    "gfs2 as recommended": (samples.GFS2_RECOMMENDED, "gfs2", Severity.OK, set()),
    "gfs2 with localflocks": (
        samples.GFS2_LOCALFLOCKS,
        "gfs2",
        Severity.REFUSED,
        {(R, "localflocks")},
    ),
    "gfs2 with lock_nolock": (
        samples.GFS2_LOCK_NOLOCK,
        "gfs2",
        Severity.REFUSED,
        {(R, "lockproto=lock_nolock"), (W, "noatime")},
    ),
    "cifs as recommended": (samples.CIFS_RECOMMENDED, "cifs", Severity.OK, set()),
    "smb3 with defaults": (
        samples.SMB3_DEFAULTS,
        "cifs",
        Severity.WARNING,
        {(W, "cache=none"), (W, "actimeo=0"), (W, "echo_interval=10")},
    ),
    "cifs with nobrl": (samples.CIFS_NOBRL, "cifs", Severity.REFUSED, {(R, "nobrl")}),
    "cifs with SMB1": (samples.CIFS_SMB1, "cifs", Severity.REFUSED, {(R, "vers=1.0")}),
    "ext4": (samples.EXT4, "local", Severity.OK, set()),
    "xfs": (samples.XFS, "local", Severity.OK, set()),
    "btrfs subvolume": (samples.BTRFS, "local", Severity.OK, set()),
    "ext4 read-only": (
        samples.EXT4_READ_ONLY,
        "local",
        Severity.REFUSED,
        {(codes.READ_ONLY_MOUNT, "ro")},
    ),
    "ext4 nobarrier": (
        samples.EXT4_NOBARRIER,
        "local",
        Severity.WARNING,
        {(codes.OPTION_DISCOURAGED, "nobarrier")},
    ),
    "tmpfs": (samples.TMPFS, "local", Severity.WARNING, {(codes.FILESYSTEM_WARNING, "tmpfs")}),
    "fuse.sshfs": (
        samples.FUSE_SSHFS,
        "local",
        Severity.WARNING,
        {(codes.FILESYSTEM_WARNING, "fuse.sshfs")},
    ),
    "ocfs2": (samples.OCFS2, None, Severity.REFUSED, {(codes.FILESYSTEM_REFUSED, "ocfs2")}),
    "overlay (unknown)": (
        samples.OVERLAY,
        "local",
        Severity.WARNING,
        {(codes.FILESYSTEM_UNKNOWN, "overlay")},
    ),
}


@pytest.mark.parametrize(("sample", "profile", "severity", "expected"), CASES.values(), ids=CASES)
def test_recorded_mount_tables(
    fs: FakeFilesystem,
    sample: str,
    profile: str | None,
    severity: Severity,
    expected: set[tuple[str, str]],
) -> None:
    diagnosis = doctor_on(fs, sample)
    assert diagnosis.mount is not None
    assert diagnosis.mount.mount_point == "/srv/primacy"
    assert (diagnosis.profile.name if diagnosis.profile else None) == profile
    assert problems(diagnosis) == expected
    assert diagnosis.severity is severity
    assert diagnosis.exit_code == int(severity)
    for finding in diagnosis.problems:
        assert finding.why and finding.fix, f"{finding.subject} lacks a why or a fix"


def test_recommended_options_are_each_reported_ok(fs: FakeFilesystem) -> None:
    diagnosis = doctor_on(fs, samples.NFS4_RECOMMENDED)
    ok = {finding.subject for finding in diagnosis.findings if finding.severity is Severity.OK}
    assert ok == {
        "vers=4.2",
        "soft",
        "timeo=20",
        "retrans=2",
        "lookupcache=none",
        "sync",
        "intr",
        "proto=tcp",
    }


def test_escaped_space_in_mount_point(fs: FakeFilesystem) -> None:
    diagnosis = doctor_on(fs, samples.ESCAPED_SPACE, path="/srv/primacy share/orders")
    assert diagnosis.mount is not None
    assert diagnosis.mount.mount_point == "/srv/primacy share"
    assert diagnosis.profile is not None and diagnosis.profile.name == "nfs4"


def test_longest_prefix_is_a_whole_path_component(fs: FakeFilesystem) -> None:
    diagnosis = doctor_on(fs, samples.NFS4_RECOMMENDED, path="/srv/primacyx")
    assert diagnosis.mount is not None
    assert (diagnosis.mount.mount_point, diagnosis.mount.fs_type) == ("/srv", "xfs")


def test_the_last_of_stacked_mounts_wins(fs: FakeFilesystem) -> None:
    diagnosis = doctor_on(fs, samples.NFS3 + samples.NFS4_RECOMMENDED)
    assert diagnosis.mount is not None and diagnosis.mount.fs_type == "nfs4"
    assert diagnosis.severity is Severity.OK


def test_a_share_that_does_not_answer_is_refused_and_not_touched(
    fs: FakeFilesystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cut link on a soft mount: stat fails with EIO (seen on the real NFSv4 tier,
    # tests/fault/test_real_nfs.py, where the doctor used to die with a traceback).
    fs.add_real_directory(PROFILE_DIR)
    fs.create_file("/proc/self/mountinfo", contents=samples.BASE + samples.NFS4_RECOMMENDED)
    create_share(fs, SHARE, perm_bits=0o770)
    real_stat = doctor_module.os.stat

    def failing_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path) == SHARE:
            raise OSError(5, "Input/output error")
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(doctor_module.os, "stat", failing_stat)
    probed: list[Path] = []
    diagnosis = diagnose(
        Path(SHARE), lock_probe=lambda share, method: probed.append(share), fsync_round_trip=True
    )
    assert problems(diagnosis) == {(codes.PATH_UNUSABLE, SHARE)}
    assert probed == []


def test_missing_path_is_refused_and_not_touched(fs: FakeFilesystem) -> None:
    fs.add_real_directory(PROFILE_DIR)
    fs.create_file("/proc/self/mountinfo", contents=samples.BASE + samples.NFS4_RECOMMENDED)
    probed: list[Path] = []
    diagnosis = diagnose(
        Path("/srv/primacy/absent"),
        lock_probe=lambda share, method: probed.append(share),
        fsync_round_trip=True,
    )
    assert problems(diagnosis) == {(codes.PATH_UNUSABLE, "/srv/primacy/absent")}
    assert diagnosis.refused
    assert probed == []


def test_unreadable_mount_table_is_a_warning(fs: FakeFilesystem) -> None:
    fs.add_real_directory(PROFILE_DIR)
    create_share(fs)
    diagnosis = diagnose(Path(SHARE))
    assert {finding.code for finding in diagnosis.problems} == {codes.MOUNT_TABLE_UNREADABLE}
    assert diagnosis.severity is Severity.WARNING


def test_check_for_run_refuses_nfs3_with_a_greppable_summary(fs: FakeFilesystem) -> None:
    fs.add_real_directory(PROFILE_DIR)
    fs.create_file("/proc/self/mountinfo", contents=samples.BASE + samples.NFS3_NOLOCK)
    fs.create_dir(SHARE)
    verdict = check_for_run(Path(SHARE))
    assert verdict.refused
    assert verdict.summary().startswith(f"{codes.OPTION_REFUSED} the share {SHARE} (nfs on ")
    assert "primacy doctor" in verdict.summary()


def test_check_for_run_passes_a_recommended_share(fs: FakeFilesystem) -> None:
    fs.add_real_directory(PROFILE_DIR)
    fs.create_file("/proc/self/mountinfo", contents=samples.BASE + samples.NFS4_RECOMMENDED)
    create_share(fs)
    verdict = check_for_run(Path(SHARE))
    assert not verdict.refused
    assert verdict.profile is not None and verdict.profile.lock_method == "posix"
    assert verdict.summary() == f"the share {SHARE} (nfs4 on /srv/primacy) passes every check"


def test_text_report_explains_each_problem(fs: FakeFilesystem) -> None:
    text = render_text(doctor_on(fs, samples.NFS3_NOLOCK))
    assert f"REFUSED  {codes.OPTION_REFUSED} nolock: refused" in text
    assert "why: with nolock the lock is only taken on this client" in text
    assert "fix: remove nolock from the mount options" in text
    assert text.rstrip().endswith("verdict: refused (exit 2)")


def test_json_report(fs: FakeFilesystem) -> None:
    report = json.loads(json.dumps(doctor_on(fs, samples.SMB3_DEFAULTS).to_dict()))
    assert report["verdict"] == "warning" and report["exit_code"] == 1
    assert report["mount"]["fs_type"] == "smb3"
    assert report["mount"]["options"]["vers"] == "3.0"
    assert report["profile"]["name"] == "cifs"
    assert report["profile"]["lock_method"] == "posix"
    warned = {item["subject"] for item in report["findings"] if item["severity"] == "warning"}
    assert warned == {"cache=none", "actimeo=0", "echo_interval=10"}


# ---- round trips on a real directory ------------------------------------------------------


def real_probe(share: Path, method: str) -> None:
    check_share(share, LockMethod(method))


def test_real_round_trips_on_tmp_path(tmp_path: Path) -> None:
    diagnosis = diagnose(tmp_path, lock_probe=real_probe, fsync_round_trip=True)
    trips = {f.subject.split(" (")[0]: f for f in diagnosis.findings if "round trip" in f.subject}
    assert set(trips) == {"lock round trip", "fsync round trip"}
    assert trips["lock round trip"].severity is Severity.OK
    assert trips["fsync round trip"].severity is Severity.OK
    assert " ms" in trips["fsync round trip"].message
    assert list(tmp_path.iterdir()) == [], "the doctor left files in the share"


def test_a_failing_lock_probe_refuses(tmp_path: Path) -> None:
    def probe(share: Path, method: str) -> None:
        raise RuntimeError(f"{method} locks on {share} do not exclude each other")

    diagnosis = diagnose(tmp_path, lock_probe=probe)
    (finding,) = [f for f in diagnosis.findings if f.code == codes.LOCK_ROUND_TRIP_FAILED]
    assert finding.severity is Severity.REFUSED
    assert "do not exclude each other" in finding.message


def test_a_slow_lock_round_trip_warns(tmp_path: Path) -> None:
    def probe(share: Path, method: str) -> None:
        time.sleep(0.2)  # the local profile's budget is half of 250 ms

    diagnosis = diagnose(tmp_path, lock_probe=probe)
    assert codes.LOCK_ROUND_TRIP_SLOW in {finding.code for finding in diagnosis.problems}


def test_this_machines_mount_table_finds_the_repository() -> None:
    repo = Path(__file__).resolve().parents[2]
    diagnosis = diagnose(repo)
    assert diagnosis.mount is not None
    device = os.stat(repo).st_dev
    assert diagnosis.mount.device == f"{os.major(device)}:{os.minor(device)}"
    print(f"\nthe repository is on {diagnosis.mount.fs_type} at {diagnosis.mount.mount_point}")
    assert diagnosis.profile is not None
    assert diagnosis.profile.matches_fs_type(diagnosis.mount.fs_type)


def test_a_share_anyone_can_write_is_flagged(tmp_path: Path) -> None:
    share = tmp_path / "share"
    (share / "epochs").mkdir(parents=True)
    (share / "nodes").mkdir()
    os.chmod(share, 0o2770)
    os.chmod(share / "epochs", 0o1777)  # even sticky: anyone may still plant a new epoch
    diagnosis = diagnose(share)
    flagged = {f.subject: f for f in diagnosis.findings if f.code == codes.WRITABLE_BY_OTHERS}
    assert list(flagged) == [str(share / "epochs")]
    assert "anyone can write it (mode 1777)" in flagged[str(share / "epochs")].message
    assert diagnosis.severity >= Severity.WARNING
    assert codes.WRITABLE_BY_OTHERS in render_text(diagnosis)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_share_owned_by_another_user_is_flagged(tmp_path: Path) -> None:
    share = tmp_path / "share"
    share.mkdir(mode=0o755)
    os.chown(share, 65534, 65534)  # nobody: it can make the share writable to anyone
    (finding,) = [f for f in diagnose(share).findings if f.code == codes.WRITABLE_BY_OTHERS]
    assert finding.subject == str(share)
    assert "belongs to uid 65534" in finding.message


def test_primacy_doctor_refuses_a_symlinked_share_directory_and_flags_a_0777_share(
    tmp_path: Path,
) -> None:
    """Through the command an operator runs: a share directory that is a symlink is refused
    (nodes would not follow it), a share anyone can write is flagged."""

    share = tmp_path / "share"
    share.mkdir()
    os.chmod(share, 0o777)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (share / "epochs").symlink_to(elsewhere, target_is_directory=True)
    result = primacy("doctor", str(share))
    output = result.stdout + result.stderr
    assert result.returncode == int(Severity.REFUSED), output
    assert codes.NOT_A_DIRECTORY in output and str(share / "epochs") in output
    assert codes.WRITABLE_BY_OTHERS in output and "mode 0777" in output


# ---- who may open the lock file, rename the share, or hold the lock (issue 27) ----------


def test_a_lock_file_others_may_open_is_flagged(tmp_path: Path) -> None:
    lock = tmp_path / "primacy.lock"
    lock.touch()
    lock.chmod(0o640)
    assert codes.LOCK_FILE_OPEN_TO_OTHERS not in {f.code for f in diagnose(tmp_path).findings}
    lock.chmod(0o644)
    (finding,) = [
        f for f in diagnose(tmp_path).findings if f.code == codes.LOCK_FILE_OPEN_TO_OTHERS
    ]
    assert finding.severity is Severity.WARNING and "mode 0644" in finding.message


def test_a_parent_anyone_can_write_without_the_sticky_bit_is_flagged(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    share = parent / "share"
    share.mkdir(parents=True)
    parent.chmod(0o1777)  # like /tmp: others may create, not rename what is not theirs
    assert codes.SHARE_RENAMABLE_BY_OTHERS not in {f.code for f in diagnose(share).findings}
    parent.chmod(0o777)
    flagged = [f for f in diagnose(share).findings if f.code == codes.SHARE_RENAMABLE_BY_OTHERS]
    assert [f.subject for f in flagged] == [str(parent)]


def test_a_lock_held_by_no_registered_node_is_flagged(tmp_path: Path) -> None:
    (tmp_path / "primacy.lock").touch()

    def held(share: Path, method: str) -> bool:
        return True

    (finding,) = [
        f
        for f in diagnose(tmp_path, lock_held=held).findings
        if f.code == codes.LOCK_HELD_BY_A_STRANGER
    ]
    assert finding.severity is Severity.WARNING
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    entry = {
        "node_id": "a",
        "host": "h",
        "pid": 1,
        "http": "127.0.0.1:1",
        "priority": "normal",
        "role": "master",
        "epoch": 1,
        "updated_unix_s": time.time(),
    }
    (nodes / "a.json").write_text(json.dumps(entry))
    found = {f.code for f in diagnose(tmp_path, lock_held=held).findings}
    assert codes.LOCK_HELD_BY_A_STRANGER not in found
