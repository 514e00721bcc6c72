"""The kernel's mount table (``/proc/self/mountinfo``): parse it and find the mount of a path."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO_PATH = Path("/proc/self/mountinfo")
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


class MountTableError(Exception):
    """The mount table cannot be read or parsed; the message says which line."""


def unescape(field: str) -> str:
    """Undo the kernel's octal escapes (``\\040`` space, ``\\011`` tab, ``\\012``, ``\\134``)."""
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


def parse_options(text: str) -> dict[str, str | None]:
    """``"rw,vers=4.2,soft"`` -> ``{"rw": None, "vers": "4.2", "soft": None}``."""
    options: dict[str, str | None] = {}
    for item in text.split(","):
        if not item:
            continue
        name, sep, value = item.partition("=")
        options[unescape(name)] = unescape(value) if sep else None
    return options


@dataclass(frozen=True)
class MountEntry:
    """One line of mountinfo (see proc(5)): where, what, and with which options."""

    mount_id: int
    parent_id: int
    device: str
    root: str
    mount_point: str
    mount_options: str
    fs_type: str
    source: str
    super_options: str

    @property
    def options(self) -> dict[str, str | None]:
        """Per-mount and superblock options merged (NFS ``vers``/``timeo`` are superblock ones)."""
        merged = parse_options(self.mount_options)
        merged.update(parse_options(self.super_options))
        return merged

    @property
    def read_only(self) -> bool:
        return "ro" in parse_options(self.mount_options) or "ro" in parse_options(
            self.super_options
        )


def parse_line(line: str) -> MountEntry:
    """Parse one mountinfo line; raise MountTableError if it is not one."""
    fields = line.split()
    try:
        separator = fields.index("-", 6)
        return MountEntry(
            mount_id=int(fields[0]),
            parent_id=int(fields[1]),
            device=fields[2],
            root=unescape(fields[3]),
            mount_point=unescape(fields[4]),
            mount_options=fields[5],
            fs_type=fields[separator + 1],
            source=unescape(fields[separator + 2]),
            super_options=fields[separator + 3] if len(fields) > separator + 3 else "",
        )
    except (ValueError, IndexError):
        raise MountTableError(f"not a mountinfo line: {line!r}") from None


def parse_mountinfo(text: str) -> tuple[MountEntry, ...]:
    return tuple(parse_line(line) for line in text.splitlines() if line.strip())


def read_mountinfo(path: Path = MOUNTINFO_PATH) -> tuple[MountEntry, ...]:
    try:
        return parse_mountinfo(Path(path).read_text(encoding="utf-8", errors="surrogateescape"))
    except OSError as exc:
        raise MountTableError(f"cannot read the mount table {path}: {exc.strerror}") from exc


def _is_under(path: str, mount_point: str) -> bool:
    if mount_point == "/":
        return path.startswith("/")
    return path == mount_point or path.startswith(mount_point + "/")


def mount_of(path: Path, entries: Iterable[MountEntry]) -> MountEntry | None:
    """The mount holding ``path``: the longest mount point that is a prefix of it.

    ``path`` is resolved (symlinks, ``..``) first. Of several mounts on the
    same point the last one listed is the one on top, as in the kernel.
    """
    resolved = os.path.realpath(path)
    best: MountEntry | None = None
    for entry in entries:
        if not _is_under(resolved, entry.mount_point):
            continue
        if best is None or len(entry.mount_point) >= len(best.mount_point):
            best = entry
    return best
