"""Share profiles: the TOML data files of this folder, loaded into frozen dataclasses.

One file per filesystem family (``nfs4.toml``, ``gfs2.toml``, ``cifs.toml``,
``local.toml``) holds the recommended mount options with a reason for each,
the lock method, the timings that fit the options, and the options refused or
discouraged; ``refused_filesystems.toml`` lists filesystems refused outright.
"""

from __future__ import annotations

import fnmatch
import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from primacy.share.posix_lock import LockMethod

PROFILE_NAMES = ("nfs4", "gfs2", "cifs", "local")
LOCK_METHODS = tuple(method.value for method in LockMethod)

MountOptions = Mapping[str, str | None]
"""Mount options by name; a flag such as ``soft`` maps to ``None``."""


class ProfileError(Exception):
    """A profile data file is missing or malformed; the message names the file and key."""


def version_tuple(text: str) -> tuple[int, ...] | None:
    """``"4.2"`` -> ``(4, 2)``; ``None`` when the text is not a dotted version."""
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        return None


@dataclass(frozen=True)
class RecommendedOption:
    """A mount option the profile recommends, with why it matters."""

    option: str
    why: str
    value: str | None = None
    accept: tuple[str, ...] = ()
    at_least: str | None = None
    shown_in_mount_table: bool = True

    @property
    def mount_option(self) -> str:
        """The option as written in fstab: ``soft`` or ``timeo=20``."""
        return self.option if self.value is None else f"{self.option}={self.value}"

    def is_satisfied_by(self, options: MountOptions) -> bool:
        if self.option not in options:
            return False
        if self.value is None:
            return True
        actual = options[self.option]
        if actual is None:
            return False
        if self.at_least is not None:
            have, need = version_tuple(actual), version_tuple(self.at_least)
            return have is not None and need is not None and have >= need
        return actual in (self.accept or (self.value,))


@dataclass(frozen=True)
class OptionRule:
    """A mount option that is refused or discouraged when it matches.

    With no condition the option's presence matches; ``equals`` matches one
    value, ``unless`` every value but one, ``below`` a version lower than it.
    """

    option: str
    why: str
    fix: str
    equals: str | None = None
    unless: str | None = None
    below: str | None = None

    def offending(self, options: MountOptions) -> str | None:
        """The matching option as text (``vers=3``), or ``None`` when it does not match."""
        if self.option not in options:
            return None
        actual = options[self.option]
        text = self.option if actual is None else f"{self.option}={actual}"
        if self.equals is not None:
            return text if actual == self.equals else None
        if self.unless is not None:
            return text if actual != self.unless else None
        if self.below is not None:
            have, limit = version_tuple(actual or ""), version_tuple(self.below)
            return text if have is not None and limit is not None and have < limit else None
        return text


@dataclass(frozen=True)
class FsTypeWarning:
    """A filesystem type the profile accepts with a warning (``fs_type`` is a glob)."""

    fs_type: str
    why: str
    fix: str

    def matches(self, fs_type: str) -> bool:
        return fnmatch.fnmatchcase(fs_type, self.fs_type)


@dataclass(frozen=True)
class ProfileTimings:
    """Node timings that fit the profile's mount options, and why."""

    lock_acquire_sleep_interval_ms: int
    lock_keep_alive_period_ms: int
    watchdog_s: int
    why: str
    stall_takeover_ms: int = 0


@dataclass(frozen=True)
class Profile:
    """Everything primacy knows about running on one filesystem family."""

    name: str
    description: str
    fs_types: tuple[str, ...]
    lock_method: str
    lock_method_why: str
    timings: ProfileTimings
    recommended: tuple[RecommendedOption, ...] = ()
    refused: tuple[OptionRule, ...] = ()
    discouraged: tuple[OptionRule, ...] = ()
    fs_type_warnings: tuple[FsTypeWarning, ...] = ()

    def matches_fs_type(self, fs_type: str) -> bool:
        return any(fnmatch.fnmatchcase(fs_type, pattern) for pattern in self.fs_types)

    @property
    def mount_options(self) -> str:
        """The recommended options as one fstab field (``vers=4.2,soft,...``)."""
        return ",".join(option.mount_option for option in self.recommended)


@dataclass(frozen=True)
class RefusedFilesystem:
    """A filesystem type primacy refuses whatever its options."""

    fs_type: str
    why: str
    fix: str


def _read_data_file(file_name: str) -> dict[str, Any]:
    try:
        text = (resources.files(__package__) / file_name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"the profile file {file_name} is missing from nfs_profiles") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"the profile file {file_name} is not valid TOML: {exc}") from exc


def _build(cls: type[Any], raw: Mapping[str, Any], where: str) -> Any:
    values = dict(raw)
    for key in ("accept", "fs_types"):
        if key in values:
            values[key] = tuple(values[key])
    try:
        return cls(**values)
    except TypeError as exc:
        raise ProfileError(f"{where}: {exc}") from exc


@functools.cache
def load_profile(name: str) -> Profile:
    """Load ``nfs_profiles/<name>.toml``; raise ProfileError if it is missing or malformed."""
    if name not in PROFILE_NAMES:
        raise ProfileError(
            f"there is no profile {name!r}; known profiles: {', '.join(PROFILE_NAMES)}"
        )
    file_name = f"{name}.toml"
    raw = _read_data_file(file_name)
    try:
        profile = Profile(
            name=raw["name"],
            description=raw["description"],
            fs_types=tuple(raw["fs_types"]),
            lock_method=raw["lock_method"],
            lock_method_why=raw["lock_method_why"],
            timings=_build(ProfileTimings, raw["timings"], f"{file_name} [timings]"),
            recommended=tuple(
                _build(RecommendedOption, item, f"{file_name} [[recommended]]")
                for item in raw.get("recommended", ())
            ),
            refused=tuple(
                _build(OptionRule, item, f"{file_name} [[refused]]")
                for item in raw.get("refused", ())
            ),
            discouraged=tuple(
                _build(OptionRule, item, f"{file_name} [[discouraged]]")
                for item in raw.get("discouraged", ())
            ),
            fs_type_warnings=tuple(
                _build(FsTypeWarning, item, f"{file_name} [[fs_type_warnings]]")
                for item in raw.get("fs_type_warnings", ())
            ),
        )
    except KeyError as exc:
        raise ProfileError(f"{file_name} has no key {exc.args[0]!r}") from None
    if profile.name != name:
        raise ProfileError(f"{file_name} says name = {profile.name!r}; it must be {name!r}")
    if profile.lock_method not in LOCK_METHODS:
        raise ProfileError(f"{file_name}: lock_method must be one of {', '.join(LOCK_METHODS)}")
    return profile


def load_profiles() -> tuple[Profile, ...]:
    """All profiles, in the order a filesystem type is matched against them."""
    return tuple(load_profile(name) for name in PROFILE_NAMES)


@functools.cache
def load_refused_filesystems() -> tuple[RefusedFilesystem, ...]:
    raw = _read_data_file("refused_filesystems.toml")
    return tuple(
        _build(RefusedFilesystem, item, "refused_filesystems.toml [[refused]]")
        for item in raw.get("refused", ())
    )
