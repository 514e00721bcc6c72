"""The share checker behind ``primacy doctor``: mount table, profile, options, lock and fsync.

``diagnose`` finds the mount of a path in the kernel's mount table, picks the
profile for its filesystem type, compares the mount options with it and, when
asked, times a real lock round trip and an fsync round trip on the share.
``check_for_run`` is the fast subset ``primacy run`` performs at start.
Nothing here imports the rest of primacy: the lock round trip is a callable
handed in (the CLI passes ``locker.probe.check_share``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from primacy.nfs_profiles import codes
from primacy.nfs_profiles.findings import Diagnosis, Finding, Severity, render_text
from primacy.nfs_profiles.mountinfo import (
    MOUNTINFO_PATH,
    MountEntry,
    MountTableError,
    mount_of,
    read_mountinfo,
)
from primacy.nfs_profiles.profiles import (
    Profile,
    load_profile,
    load_profiles,
    load_refused_filesystems,
)
from primacy.nfs_profiles.round_trips import LockProbe, time_fsync_round_trip, time_lock_round_trip
from primacy.share.layout import ShareLayout

__all__ = [
    "Diagnosis",
    "Finding",
    "LockProbe",
    "Severity",
    "check_for_run",
    "diagnose",
    "render_text",
]


def select_profile(fs_type: str) -> tuple[Profile | None, tuple[Finding, ...]]:
    """The profile for a filesystem type, or ``None`` with a refusal for a refused type."""
    for refused in load_refused_filesystems():
        if refused.fs_type == fs_type:
            finding = Finding(
                Severity.REFUSED,
                fs_type,
                "refused",
                codes.FILESYSTEM_REFUSED,
                refused.why,
                refused.fix,
            )
            return None, (finding,)
    for profile in load_profiles():
        if profile.matches_fs_type(fs_type):
            warnings = tuple(
                Finding(
                    Severity.WARNING,
                    fs_type,
                    "works with caveats",
                    codes.FILESYSTEM_WARNING,
                    warning.why,
                    warning.fix,
                )
                for warning in profile.fs_type_warnings
                if warning.matches(fs_type)
            )
            return profile, warnings
    unknown = Finding(
        Severity.WARNING,
        fs_type,
        "no profile for this filesystem type; checked as a local filesystem",
        codes.FILESYSTEM_UNKNOWN,
        "primacy only vouches for NFSv4, GFS2, CIFS and local filesystems",
        "check that locks exclude across nodes and fsync is durable, or use a supported filesystem",
    )
    return load_profile("local"), (unknown,)


def check_mount_options(mount: MountEntry, profile: Profile) -> tuple[Finding, ...]:
    """Compare a mount's options with the profile: refused, discouraged, recommended."""
    options = mount.options
    findings: list[Finding] = []
    if mount.read_only:
        findings.append(
            Finding(
                Severity.REFUSED,
                "ro",
                "the share is mounted read-only",
                codes.READ_ONLY_MOUNT,
                "a node must create the lock file, epochs and journal segments in the share",
                f"mount {mount.mount_point} read-write",
            )
        )
    for rule in profile.refused:
        if (text := rule.offending(options)) is not None:
            findings.append(
                Finding(
                    Severity.REFUSED,
                    text,
                    "refused",
                    codes.OPTION_REFUSED,
                    rule.why,
                    rule.fix,
                )
            )
    for rule in profile.discouraged:
        if (text := rule.offending(options)) is not None:
            findings.append(
                Finding(
                    Severity.WARNING,
                    text,
                    "discouraged",
                    codes.OPTION_DISCOURAGED,
                    rule.why,
                    rule.fix,
                )
            )
    refused_names = {rule.option for rule in profile.refused if rule.offending(options)}
    for option in profile.recommended:
        if not option.shown_in_mount_table:
            findings.append(
                Finding(
                    Severity.OK,
                    option.mount_option,
                    "not shown in the mount table, cannot be checked",
                    why=option.why,
                )
            )
        elif option.is_satisfied_by(options):
            actual = options[option.option]
            shown = option.option if actual is None else f"{option.option}={actual}"
            findings.append(Finding(Severity.OK, shown, "as recommended", why=option.why))
        elif option.option not in refused_names:
            actual = options.get(option.option)
            found = option.option if actual is None else f"{option.option}={actual}"
            have = f"found {found}" if option.option in options else "missing"
            findings.append(
                Finding(
                    Severity.WARNING,
                    option.mount_option,
                    have,
                    codes.OPTION_NOT_RECOMMENDED,
                    option.why,
                    f"add {option.mount_option} to the options of {mount.mount_point} in "
                    "/etc/fstab (or its .mount unit), then unmount and mount it again",
                )
            )
    return tuple(findings)


def check_path(path: Path) -> tuple[Finding, ...]:
    if not path.exists():
        return (
            Finding(
                Severity.REFUSED,
                str(path),
                "does not exist",
                codes.PATH_UNUSABLE,
                "the share directory holds the lock file and the journal",
                "mount the share, or create the directory in it",
            ),
        )
    if not path.is_dir():
        return (
            Finding(
                Severity.REFUSED,
                str(path),
                "is not a directory",
                codes.PATH_UNUSABLE,
                "the share must be a directory",
                "point primacy at a directory",
            ),
        )
    return ()


def check_who_can_write(path: Path) -> tuple[Finding, ...]:
    """Flag share directories that users outside the primacy group could write.

    Whoever can write the share can plant files every node reads (epochs, registry
    entries, segments), and whoever owns a directory can make it writable; so the
    share and its directories should belong to root or to the user primacy runs
    as, with write access for that user and the primacy group only.
    """
    findings = []
    for directory in ShareLayout(path).directories:
        name = directory.relative_to(path)
        try:
            info = os.lstat(directory)
        except OSError:
            continue  # not created yet: primacy creates it with its own mode
        if not stat.S_ISDIR(info.st_mode):
            findings.append(
                Finding(
                    Severity.REFUSED,
                    str(directory),
                    "a symlink or another kind of file has the name of a directory primacy keeps",
                    codes.NOT_A_DIRECTORY,
                    "nodes refuse to follow it: claims, the registry or the journal fail there",
                    f"move it away; primacy creates {name} as a directory of its own",
                )
            )
            continue
        problems = []
        if info.st_mode & stat.S_IWOTH:
            problems.append(f"anyone can write it (mode {stat.S_IMODE(info.st_mode):04o})")
        if info.st_uid not in (0, os.geteuid()):
            problems.append(f"it belongs to uid {info.st_uid}, who can change its mode")
        if problems:
            findings.append(
                Finding(
                    Severity.WARNING,
                    str(directory),
                    "; ".join(problems),
                    codes.WRITABLE_BY_OTHERS,
                    "a file planted on the share is read by every node",
                    "chown root:primacy on the share and its directories, then chmod 2770",
                )
            )
    return tuple(findings)


def diagnose(
    path: Path,
    *,
    lock_probe: LockProbe | None = None,
    fsync_round_trip: bool = False,
    mountinfo_path: Path = MOUNTINFO_PATH,
) -> Diagnosis:
    """Check ``path`` as a share; round trips run only when asked and the path is usable."""
    path = Path(path)
    findings: list[Finding] = list(check_path(path))
    if not findings:
        findings.extend(check_who_can_write(path))
    try:
        mount = mount_of(path, read_mountinfo(mountinfo_path))
    except MountTableError as exc:
        mount = None
        findings.append(
            Finding(
                Severity.WARNING,
                str(mountinfo_path),
                str(exc),
                codes.MOUNT_TABLE_UNREADABLE,
                "the mount options decide whether the lock is safe",
                "run the doctor where /proc is mounted",
            )
        )
    profile: Profile | None
    if mount is None:
        profile = load_profile("local")
        if not findings:
            findings.append(
                Finding(
                    Severity.WARNING,
                    str(path),
                    "no mount in the mount table holds it",
                    codes.MOUNT_TABLE_UNREADABLE,
                    "the mount options decide whether the lock is safe",
                    "run the doctor in the namespace primacy runs in",
                )
            )
    else:
        profile, fs_findings = select_profile(mount.fs_type)
        findings.extend(fs_findings)
        if profile is not None:
            findings.extend(check_mount_options(mount, profile))
    usable = not any(finding.code == codes.PATH_UNUSABLE for finding in findings)
    if usable and profile is not None:
        if lock_probe is not None:
            findings.append(time_lock_round_trip(path, profile, lock_probe))
        if fsync_round_trip:
            findings.append(time_fsync_round_trip(path, profile))
    return Diagnosis(path, mount, profile, tuple(findings))


def check_for_run(path: Path, *, mountinfo_path: Path = MOUNTINFO_PATH) -> Diagnosis:
    """What ``primacy run`` checks at start: the mount table only, no I/O on the share.

    Refuse to start when ``.refused`` (unless ``--force-unsupported-share``),
    log ``.summary()`` with ``codes.RUN_SHARE_*``; ``.profile`` is the profile
    in force (``None`` only for a refused filesystem type).
    """
    return diagnose(path, mountinfo_path=mountinfo_path)
