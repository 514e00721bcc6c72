"""The profile data files and the mountinfo parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from primacy.nfs_profiles.mountinfo import (
    mount_of,
    parse_line,
    parse_mountinfo,
    parse_options,
    unescape,
)
from primacy.nfs_profiles.profiles import (
    PROFILE_NAMES,
    OptionRule,
    ProfileError,
    RecommendedOption,
    load_profile,
    load_refused_filesystems,
)

ISSUE_NFS4_OPTIONS = {"vers", "soft", "timeo", "retrans", "lookupcache", "sync", "intr", "proto"}


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_every_profile_loads_with_reasons(name: str) -> None:
    profile = load_profile(name)
    assert profile.name == name
    assert profile.lock_method in ("flock", "posix")
    assert profile.lock_method_why
    assert profile.timings.why
    assert profile.timings.lock_acquire_sleep_interval_ms > 0
    assert 0 < profile.timings.lock_keep_alive_period_ms < profile.timings.watchdog_s * 1000
    for item in (*profile.recommended, *profile.refused, *profile.discouraged):
        assert item.why, f"{name}: {item.option} has no reason"
    for rule in (*profile.refused, *profile.discouraged):
        assert rule.fix, f"{name}: {rule.option} has no fix"


def test_nfs4_recommends_what_the_issue_asks() -> None:
    profile = load_profile("nfs4")
    assert {option.option for option in profile.recommended} == ISSUE_NFS4_OPTIONS
    assert profile.mount_options.startswith("vers=4.2,soft,timeo=20,retrans=2,lookupcache=none")
    refused = {rule.option for rule in profile.refused}
    assert refused == {"vers", "nolock", "local_lock"}


def test_nfs4_watchdog_outlasts_a_soft_timeout() -> None:
    """timeo/retrans over TCP back off linearly: timeo * (1 + 2 + ... + (retrans + 1))."""
    profile = load_profile("nfs4")
    options = {option.option: option.value for option in profile.recommended}
    timeo_s = int(options["timeo"] or 0) / 10
    retrans = int(options["retrans"] or 0)
    soft_timeout_s = timeo_s * sum(range(1, retrans + 2))
    assert soft_timeout_s == 12.0
    keepalive_s = profile.timings.lock_keep_alive_period_ms / 1000
    assert profile.timings.watchdog_s > soft_timeout_s + keepalive_s
    assert keepalive_s <= timeo_s


def test_local_profile_matches_the_supervisor_defaults() -> None:
    from primacy.supervisor import config

    timings = load_profile("local").timings
    assert timings.lock_acquire_sleep_interval_ms == config.DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL_MS
    assert timings.lock_keep_alive_period_ms == config.DEFAULT_LOCK_KEEP_ALIVE_PERIOD_MS


def test_ocfs2_is_refused_outright() -> None:
    assert "ocfs2" in {refused.fs_type for refused in load_refused_filesystems()}


def test_unknown_profile_is_a_clear_error() -> None:
    with pytest.raises(ProfileError, match="known profiles: nfs4, gfs2, cifs, local"):
        load_profile("zfs")


@pytest.mark.parametrize(
    ("options", "satisfied"),
    [
        ({"vers": "4.2"}, True),
        ({"vers": "4.1"}, True),
        ({"vers": "4.10"}, True),
        ({"vers": "4.0"}, False),
        ({"vers": "4"}, False),
        ({"vers": "weird"}, False),
        ({}, False),
    ],
)
def test_version_at_least(options: dict[str, str | None], satisfied: bool) -> None:
    option = RecommendedOption("vers", "why", value="4.2", at_least="4.1")
    assert option.is_satisfied_by(options) is satisfied


@pytest.mark.parametrize(
    ("rule", "options", "offending"),
    [
        (OptionRule("nolock", "w", "f"), {"nolock": None}, "nolock"),
        (OptionRule("nolock", "w", "f"), {"lock": None}, None),
        (OptionRule("local_lock", "w", "f", unless="none"), {"local_lock": "none"}, None),
        (
            OptionRule("local_lock", "w", "f", unless="none"),
            {"local_lock": "posix"},
            "local_lock=posix",
        ),
        (OptionRule("vers", "w", "f", below="4"), {"vers": "3"}, "vers=3"),
        (OptionRule("vers", "w", "f", below="4"), {"vers": "4.0"}, None),
        (OptionRule("barrier", "w", "f", equals="0"), {"barrier": "1"}, None),
    ],
)
def test_option_rules(
    rule: OptionRule, options: dict[str, str | None], offending: str | None
) -> None:
    assert rule.offending(options) == offending


def test_mountinfo_line_with_several_optional_fields() -> None:
    entry = parse_line(
        "36 35 98:0 /mnt1 /mnt/with\\040space\\011tab rw,noatime master:1 shared:7 - ext3 "
        "/dev/root rw,errors=continue"
    )
    assert entry.root == "/mnt1"
    assert entry.mount_point == "/mnt/with space\ttab"
    assert entry.fs_type == "ext3"
    assert entry.source == "/dev/root"
    assert entry.options == {"rw": None, "noatime": None, "errors": "continue"}


def test_unescape_backslash() -> None:
    assert unescape("a\\134b") == "a\\b"
    assert parse_options("rw,,vers=4.2") == {"rw": None, "vers": "4.2"}


def test_root_mount_holds_everything() -> None:
    entries = parse_mountinfo("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n")
    assert mount_of(Path("/var/lib"), entries) is entries[0]
