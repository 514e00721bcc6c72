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
import time
from collections.abc import Callable
from pathlib import Path

from primacy.nfs_profiles import codes
from primacy.nfs_profiles.findings import Diagnosis, Finding, Severity, render_text
from primacy.nfs_profiles.group_settings_check import check_group_settings, recorded_lock_method
from primacy.nfs_profiles.mountinfo import (
    MOUNTINFO_PATH,
    MountEntry,
    MountTableError,
    mount_of,
    read_mountinfo,
)
from primacy.nfs_profiles.ownership import check_ownership, service_identity
from primacy.nfs_profiles.profiles import (
    Profile,
    load_profile,
    load_profiles,
    load_refused_filesystems,
)
from primacy.nfs_profiles.round_trips import LockProbe, time_fsync_round_trip, time_lock_round_trip
from primacy.share.access import Identity
from primacy.share.factory import GroupLocation, open_port
from primacy.share.layout import DIRECTORY_MODE, FILE_MODE, ShareLayout
from primacy.share.records import HOLDING_ROLES

# Whether someone holds the share's lock (tried once, let go at once); None if it cannot say.
LockHeld = Callable[[Path, str], bool | None]

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
    try:
        os.stat(path)
    except FileNotFoundError:
        pass  # said below
    except OSError as exc:
        # A share that does not answer (a cut link, a dead server on a soft mount)
        # is a finding, not a crash of the doctor (found on the real NFSv4 tier).
        return (
            Finding(
                Severity.REFUSED,
                str(path),
                f"does not answer: {exc.strerror}",
                codes.PATH_UNUSABLE,
                "every node reads and locks the share all the time",
                "check the file server and the network to it, then run the doctor again",
            ),
        )
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


def check_who_can_write(path: Path, service: Identity | None = None) -> tuple[Finding, ...]:
    """Flag share directories that users outside the primacy group could write.

    Whoever can write the share can plant files every node reads (epochs, registry
    entries, segments), and whoever owns a directory can make it writable; so the
    share and its directories should belong to the user primacy runs as (``service``,
    by default the doctor's own), mode 0750: the one answer ``check_ownership`` gives too.
    """
    service = service or Identity.current()
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
        if info.st_uid not in (0, service.uid):
            problems.append(f"it belongs to uid {info.st_uid}, who can change its mode")
        if problems:
            findings.append(
                Finding(
                    Severity.WARNING,
                    str(directory),
                    "; ".join(problems),
                    codes.WRITABLE_BY_OTHERS,
                    "a file planted on the share is read by every node",
                    f"chown {service.owner} {directory} && chmod {DIRECTORY_MODE:04o} {directory}",
                )
            )
    return tuple(findings)


def check_lock_file_mode(path: Path) -> tuple[Finding, ...]:
    """Flag a lock file users outside its owner and group may open: whoever can open it can
    lock it (``flock`` takes an exclusive lock through a read-only descriptor), and while
    they hold it no node becomes master and every slave waits (issue 27)."""
    lock = ShareLayout(path).lock_file
    try:
        info = os.lstat(lock)
    except OSError:
        return ()  # not created yet: nodes create it with FILE_MODE
    mode = stat.S_IMODE(info.st_mode)
    if not stat.S_ISREG(info.st_mode) or not mode & 0o007:
        return ()
    return (
        Finding(
            Severity.WARNING,
            str(lock),
            f"anyone on the host can open it (mode {mode:04o})",
            codes.LOCK_FILE_OPEN_TO_OTHERS,
            "whoever can open the lock file can lock it, even read-only, and then no node "
            "becomes master while every slave waits",
            f"chmod o-rwx {lock} (nodes create it {FILE_MODE:04o})",
        ),
    )


def check_share_ancestors(path: Path) -> tuple[Finding, ...]:
    """Flag a directory above the share that anyone may write without the sticky bit: anyone
    can rename the share (or a directory holding it) away and put their own in its place,
    which every node then uses as the share."""
    absolute = Path(os.path.abspath(path))
    ancestors = dict.fromkeys([*absolute.parents, *absolute.resolve().parents])
    findings = []
    for directory in ancestors:
        try:
            info = os.stat(directory)
        except OSError:
            continue
        if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
            findings.append(
                Finding(
                    Severity.WARNING,
                    str(directory),
                    f"anyone can write it and it has no sticky bit "
                    f"(mode {stat.S_IMODE(info.st_mode):04o})",
                    codes.SHARE_RENAMABLE_BY_OTHERS,
                    f"anyone on the host can rename {absolute} away and put a directory of "
                    "their own in its place",
                    f"chmod o-w {directory}, or chmod +t {directory} if others must create "
                    "files there",
                )
            )
    return tuple(findings)


def check_lock_holder(path: Path, lock_held: LockHeld, method: str) -> tuple[Finding, ...]:
    """Flag a lock that is held while no live node is registered in a role that holds it:
    something that is not a primacy node has it (a user's ``flock``, a stuck tool), and no
    node can become master. A node that took the lock within the last registry refresh is
    not registered yet, hence "if it persists"."""
    if lock_held(path, method) is not True:
        return ()
    now = time.time()
    holders = [
        entry
        for entry in open_port(GroupLocation(path)).node_entries()
        if entry.is_live(now) and entry.role in HOLDING_ROLES
    ]
    if holders:
        return ()
    lock = ShareLayout(path).lock_file
    return (
        Finding(
            Severity.WARNING,
            str(lock),
            "the lock is held, but no live primacy node is registered as holding it",
            codes.LOCK_HELD_BY_A_STRANGER,
            "while something that is not a primacy node holds the lock, no node becomes master",
            f"if it persists, find the holder (fuser -v {lock}, or the file's inode in "
            f"/proc/locks on each host), stop it, and chmod o-rwx {lock}",
        ),
    )


def diagnose(
    path: Path,
    *,
    lock_probe: LockProbe | None = None,
    lock_held: LockHeld | None = None,
    fsync_round_trip: bool = False,
    mountinfo_path: Path = MOUNTINFO_PATH,
    owners: bool = False,
    service_user: str | None = None,
) -> Diagnosis:
    """Check ``path`` as a share; round trips (and ``lock_held``, which tries the share's
    own lock) run only when asked and the path is usable. ``owners``: also check every path
    on the share against the service user (``service_user``, or ``ownership.service_identity``'s
    default: as root, the share's owner), whose directories ``check_who_can_write`` then expects."""
    path = Path(path)
    findings: list[Finding] = list(check_path(path))
    service, unknown = service_identity(service_user, path) if owners else (None, ())
    findings.extend(unknown)
    if not findings:
        findings.extend(check_who_can_write(path, service))
        if service is not None:
            findings.extend(check_ownership(path, service))
        findings.extend(check_lock_file_mode(path))
        findings.extend(check_share_ancestors(path))
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
        if lock_held is not None:  # the doctor's full look, not primacy run's start check
            method = recorded_lock_method(path) or profile.lock_method  # the one nodes use
            findings.extend(check_lock_holder(path, lock_held, method))
            findings.extend(check_group_settings(path, profile))
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
