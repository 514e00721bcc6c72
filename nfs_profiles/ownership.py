"""The doctor's ownership check: every path on the share the service user must use, and can.

A node runs as the service user and cannot use what another user left on the share (a node
started by hand as root writes ``root:root 0640`` epochs and segments; issue 45, item 3).
``share.access`` answers from ``lstat``, so root can check for the service user: the doctor
checks for ``--user`` when given, else for the user it runs as; run as root, for the
owner of the share directory (the install gives it to the service user), and not at all
when root owns it (name the user then). Every finding carries the one fix: the service user owns
everything on the share, with the modes primacy creates (``share.layout``).
"""

from __future__ import annotations

import os
from pathlib import Path

from primacy.nfs_profiles import codes
from primacy.nfs_profiles.findings import Finding, Severity
from primacy.share.access import Identity, share_fix, unusable_paths
from primacy.share.layout import ShareLayout

LISTED = 20  # paths named one by one; the rest in one finding with the fix for the whole share


def service_identity(user: str | None, share: Path) -> tuple[Identity | None, tuple[Finding, ...]]:
    """Whom the share must serve: ``user`` if named, else this process's user, or as root
    the share directory's owner unless that is root; None if nobody (and why, as a finding,
    if ``user`` is unknown here)."""
    if user is None:
        if os.geteuid() != 0:
            return Identity.current(), ()
        try:
            owner = os.stat(share)
        except OSError:
            return None, ()  # check_path says why
        if owner.st_uid == 0:
            return None, ()
        try:
            return Identity.named(str(owner.st_uid)), ()
        except KeyError:  # a uid this host has no name for (the file server's)
            gid = owner.st_gid
            return Identity(owner.st_uid, frozenset({gid}), str(owner.st_uid), str(gid)), ()
    name = user
    try:
        return Identity.named(name), ()
    except (KeyError, OverflowError):
        return None, (
            Finding(
                Severity.WARNING,
                name,
                f"no user {name} on this host: the share's owners and modes were not checked",
                codes.SERVICE_USER_UNKNOWN,
                "a node cannot use a file its user may not read (it then claims no epoch)",
                "name the user the nodes run as: primacy doctor PATH --user NAME",
            ),
        )


def check_ownership(path: Path, identity: Identity) -> tuple[Finding, ...]:
    """A refusal for each path under ``path`` that ``identity`` cannot use as a node does."""
    found = unusable_paths(ShareLayout(path), identity)
    why = (
        f"the nodes run as {identity.user}: while a path on the share is unusable to them, "
        "no node claims an epoch and the group has no master"
    )
    findings = [
        Finding(
            Severity.REFUSED,
            str(item.path),
            item.problem(identity.user),
            codes.SHARE_UNUSABLE_BY_SERVICE_USER,
            why,
            item.fix(identity),
        )
        for item in found[:LISTED]
    ]
    if len(found) > LISTED:
        findings.append(
            Finding(
                Severity.REFUSED,
                str(path),
                f"and {len(found) - LISTED} more paths {identity.user} cannot use",
                codes.SHARE_UNUSABLE_BY_SERVICE_USER,
                why,
                share_fix(path, identity),
            )
        )
    return tuple(findings)
