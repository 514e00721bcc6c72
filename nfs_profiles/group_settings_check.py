"""The doctor's look at ``group.json``: what the group recorded about how it locks the share."""

from __future__ import annotations

from pathlib import Path

from primacy.nfs_profiles import codes
from primacy.nfs_profiles.findings import Finding, Severity
from primacy.nfs_profiles.profiles import Profile
from primacy.share.group_settings import GroupSettingsUnreadable, read_group_settings
from primacy.share.layout import ShareLayout


def check_group_settings(path: Path, profile: Profile) -> tuple[Finding, ...]:
    """A record no node can read (every node refuses to start on it), or a recorded lock method
    other than the profile's (every node follows the record: say so, and how to change it)."""
    layout = ShareLayout(path)
    try:
        recorded = read_group_settings(layout)
    except GroupSettingsUnreadable as exc:
        return (
            Finding(
                Severity.REFUSED,
                str(layout.group_settings),
                str(exc),
                codes.GROUP_SETTINGS_UNREADABLE,
                "it records how the group locks the share: every node refuses to start without it",
                "restore it, or remove it once every node runs with the same lock_method (the "
                "next node to start records its own)",
            ),
        )
    if recorded is None or recorded.lock_method == profile.lock_method:
        return ()
    return (
        Finding(
            Severity.WARNING,
            str(layout.group_settings),
            f"the group locks the share with {recorded.lock_method!r}; the {profile.name} profile "
            f"says {profile.lock_method!r}",
            codes.GROUP_LOCK_METHOD_NOT_THE_PROFILES,
            profile.lock_method_why,
            f"every node follows the record, so the group is consistent; to switch, stop every "
            f"node, set lock_method = {profile.lock_method!r} in each config and in "
            f"{layout.group_settings}, then start them",
        ),
    )


def recorded_lock_method(path: Path) -> str | None:
    """The lock method the group recorded, None if none is recorded or the record is unreadable."""
    try:
        recorded = read_group_settings(ShareLayout(path))
    except GroupSettingsUnreadable:
        return None
    return None if recorded is None else recorded.lock_method
