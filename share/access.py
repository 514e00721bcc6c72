"""Whether one identity (a uid and its groups) can use every path primacy keeps on a share.

A node run as the service user cannot use a file another user left there (a node once
started as root wrote ``root:root 0640`` segments and epochs): it claimed epoch after
epoch and failed to open the journal each time (issue 45, item 3). The node asks
``unusable_paths`` before it claims an epoch; ``primacy doctor`` asks it for the service
user, which root may name (the answer comes from ``lstat``, not from trying, so one user can
check for another). Directories need ``rwx``; the lock file ``rw``; every other file ``r``:
what the node does with each. Entries whose names start with a dot are temporaries no node
reads; symlinks and other kinds of file are the untrusted-share checks' business.

The one right fix is always the same: what primacy itself creates, owned by the service user
(``share.layout.FILE_MODE``, ``DIRECTORY_MODE``).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from primacy.share.layout import DIRECTORY_MODE, FILE_MODE, ShareLayout

READ, WRITE, SEARCH = 4, 2, 1  # the rwx bits of one permission class


@dataclass(frozen=True)
class Identity:
    """Who uses the share: a uid, its groups, and names for the advice."""

    uid: int
    gids: frozenset[int]
    user: str
    group: str

    @classmethod
    def current(cls) -> Identity:
        """This process's effective identity (a node's)."""
        uid, gid = os.geteuid(), os.getegid()
        return cls(uid, frozenset({gid, *os.getgroups()}), _user_name(uid), _group_name(gid))

    @classmethod
    def named(cls, user: str) -> Identity:
        """The system user ``user`` (a name or a uid), with its primary and supplementary
        groups; ``KeyError`` if there is no such user."""
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
        gids = {entry.pw_gid, *os.getgrouplist(entry.pw_name, entry.pw_gid)}
        return cls(entry.pw_uid, frozenset(gids), entry.pw_name, _group_name(entry.pw_gid))

    @property
    def owner(self) -> str:
        """``user:group``, as ``chown`` takes it."""
        return f"{self.user}:{self.group}"


@dataclass(frozen=True)
class Unusable:
    """A path ``identity`` cannot use as a node must, and the one command that fixes it."""

    path: Path
    is_directory: bool
    uid: int
    gid: int
    mode: int
    needs: str  # "rwx", "rw" or "r"

    def problem(self, who: str = "the service user") -> str:
        kind = "directory" if self.is_directory else "file"
        return (
            f"{kind} owned by {_user_name(self.uid)}:{_group_name(self.gid)} mode "
            f"{self.mode:04o}: {who} cannot {_verbs(self.needs)} it"
        )

    def fix(self, identity: Identity) -> str:
        mode = DIRECTORY_MODE if self.is_directory else FILE_MODE
        return f"chown {identity.owner} {self.path} && chmod {mode:04o} {self.path}"


def share_fix(root: Path, identity: Identity) -> str:
    """The fix for a whole share: the service user owns everything, with primacy's own modes."""
    return f"chown -R {identity.owner} {root} && chmod -R u=rwX,g=rX,o= {root}"


def unusable_paths(
    layout: ShareLayout, identity: Identity, *, journal_only: bool = False
) -> tuple[Unusable, ...]:
    """Every path of ``layout`` that ``identity`` cannot use as a node does, share root first.

    ``journal_only``: the lock, epochs and registry live elsewhere (ZooKeeper); the share
    holds the journal, reached through its root. A missing path is no finding: a node
    creates it (in a directory this also checks). For the calling process's own identity
    a path the modes refuse is asked about once more with ``access(2)``, so an ACL that
    grants it is not taken for a refusal.
    """
    found = []
    ourselves = identity == Identity.current()
    for path, needs in _paths_in_use(layout, journal_only):
        try:
            info = os.lstat(path)
        except OSError:
            continue
        is_directory = stat.S_ISDIR(info.st_mode)
        if not (is_directory or stat.S_ISREG(info.st_mode)):
            continue
        if _allowed(info, identity) & needs == needs:
            continue
        if ourselves and _access_allows(path, needs):
            continue
        found.append(
            Unusable(
                path,
                is_directory,
                info.st_uid,
                info.st_gid,
                stat.S_IMODE(info.st_mode),
                _letters(needs),
            )
        )
    return tuple(found)


def _paths_in_use(layout: ShareLayout, journal_only: bool) -> Iterator[tuple[Path, int]]:
    rwx, rw = READ | WRITE | SEARCH, READ | WRITE
    yield layout.root, rwx if not journal_only else SEARCH
    yield layout.group_settings, READ  # every node reads it at start, whatever it coordinates on
    if not journal_only:
        yield layout.lock_file, rw
        for marker in (layout.paused_marker, layout.switchover_marker):
            yield marker, READ
    directories = [layout.journal, layout.checkpoints, layout.quarantine]
    if not journal_only:
        directories[:0] = [layout.epochs, layout.nodes]
    for directory in directories:
        yield directory, rwx
        yield from ((path, READ) for path in _files_in(directory))


def _files_in(directory: Path) -> list[Path]:
    try:
        with os.scandir(directory) as entries:
            return sorted(
                Path(entry.path)
                for entry in entries
                if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False)
            )
    except OSError:
        return []  # missing, or not searchable: the directory itself is the finding


def _allowed(info: os.stat_result, identity: Identity) -> int:
    """The rwx bits ``identity`` has on a file with ``info``, as the kernel picks the class."""
    if identity.uid == 0:
        return READ | WRITE | SEARCH
    mode = info.st_mode
    if info.st_uid == identity.uid:
        return (mode >> 6) & 7
    if info.st_gid in identity.gids:
        return (mode >> 3) & 7
    return mode & 7


def _access_allows(path: Path, needs: int) -> bool:
    mode = (os.R_OK if needs & READ else 0) | (os.W_OK if needs & WRITE else 0)
    mode |= os.X_OK if needs & SEARCH else 0
    try:
        return os.access(path, mode, effective_ids=os.access in os.supports_effective_ids)
    except OSError:
        return False


def _letters(bits: int) -> str:
    return "".join(
        letter for bit, letter in ((READ, "r"), (WRITE, "w"), (SEARCH, "x")) if bits & bit
    )


def _verbs(needs: str) -> str:
    return {
        "rwx": "list, create and remove files in",
        "rw": "read and write",
        "r": "read",
        "x": "reach the journal through",
    }.get(needs, needs)


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)
