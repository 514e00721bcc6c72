"""Who a node is to a ZooKeeper ensemble and how it reaches it: digest credentials, the ACL every
znode it creates carries, and TLS.

A node with credentials (``user:password`` in a private file) authenticates its
session with ZooKeeper's ``digest`` scheme, and every znode it creates gets
``digest:user:hash`` with all permissions plus ``world:anyone`` read: only the
group's own identity may create, change or delete a lock, an epoch, the
counter or a marker, and the read-only commands (``primacy status``,
``cluster``) need no password (docs/operator-guide.md, "ZooKeeper access").
Digest authentication itself never fails (the server derives the identity
from whatever is sent): a wrong password is a different identity, which the
group's ACL refuses (``NoAuth``).

TLS is on when a CA file is given: the server's certificate must chain to it
(or to the system's CAs, which kazoo always loads) and name the host the node
dialled; a client certificate and key are sent when given (an ensemble with
``ssl.clientAuth=need``, ZooKeeper's default, requires one).
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped]
from kazoo.security import (  # type: ignore[import-untyped]
    ACL,
    Permissions,
    make_acl,
    make_digest_acl,
    make_digest_acl_credential,
)

from primacy.share.secret_file import SecretFileError, read_secret_file

log = logging.getLogger("primacy.share.zookeeper")

CREDENTIALS_WHAT = "ZooKeeper credentials file"


class ZooKeeperAccessError(ValueError):
    """The credentials or TLS files cannot be used; one sentence, with the fix."""


@dataclass(frozen=True)
class ZooKeeperAccess:
    """The identity and transport of one client; the default is anonymous and plaintext."""

    user: str | None = None
    password: str | None = None
    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None

    def __repr__(self) -> str:  # never the password
        return (
            f"ZooKeeperAccess(user={self.user!r}, tls={self.tls}, "
            f"client_cert={self.tls_cert_file is not None})"
        )

    @property
    def authenticated(self) -> bool:
        return self.user is not None

    @property
    def tls(self) -> bool:
        return self.tls_ca_file is not None

    @property
    def identity(self) -> str | None:
        """The digest identity ZooKeeper derives from the credentials (``user:base64 sha1``)."""
        if self.user is None or self.password is None:
            return None
        return str(make_digest_acl_credential(self.user, self.password))

    def acl(self) -> list[ACL] | None:
        """What every znode the client creates carries; None (kazoo's open ACL) without
        credentials."""
        if self.user is None or self.password is None:
            return None
        return [
            make_digest_acl(self.user, self.password, all=True),
            make_acl("world", "anyone", read=True),
        ]

    def kazoo_options(self) -> dict[str, Any]:
        """Keyword arguments of ``KazooClient`` for this access."""
        options: dict[str, Any] = {}
        if self.user is not None:
            options["auth_data"] = [("digest", f"{self.user}:{self.password}")]
            options["default_acl"] = self.acl()
        if self.tls_ca_file is not None:
            options.update(
                use_ssl=True,
                ca=str(self.tls_ca_file),
                verify_certs=True,
                check_hostname=True,
            )
            if self.tls_cert_file is not None:
                options.update(certfile=str(self.tls_cert_file), keyfile=str(self.tls_key_file))
        return options

    def admits(self, acl: list[ACL]) -> bool:
        """Whether ``acl`` is this access's own: nobody but its identity may change the znode
        (world read is fine). Without credentials nothing is admitted as tight."""
        identity = self.identity
        if identity is None:
            return False
        for entry in acl:
            scheme, who = entry.id.scheme, entry.id.id
            if scheme == "digest" and who == identity:
                continue
            if entry.perms & ~Permissions.READ:
                return False  # another identity, or anyone, may write, create, delete or admin
        return any(e.id.scheme == "digest" and e.id.id == identity for e in acl)


def open_to_anyone(acl: list[ACL]) -> bool:
    """Whether ``acl`` lets any client (``world:anyone``) do more than read."""
    return any(entry.id.scheme == "world" and entry.perms & ~Permissions.READ for entry in acl)


def parse_credentials(data: bytes, path: Path) -> tuple[str, str]:
    """``user:password`` (one line; a trailing newline is dropped) as (user, password)."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise ZooKeeperAccessError(f"the {CREDENTIALS_WHAT} {path} is not UTF-8 text") from None
    text = text.removesuffix("\n").removesuffix("\r")
    user, colon, password = text.partition(":")
    if not colon or not user or not password or "\n" in text or user.strip() != user:
        raise ZooKeeperAccessError(
            f"the {CREDENTIALS_WHAT} {path} must hold one line USER:PASSWORD (a user without "
            "':' or spaces around it, and a password that is not empty)"
        )
    return user, password


def load_access(
    credentials_file: Path | None,
    tls_ca_file: Path | None = None,
    tls_cert_file: Path | None = None,
    tls_key_file: Path | None = None,
) -> ZooKeeperAccess:
    """The access the config's keys describe: the credentials file read and checked (mode 600,
    the owner root or this user), the TLS files checked; ZooKeeperAccessError if any is
    unusable."""
    user = password = None
    try:
        if credentials_file is not None:
            data = read_secret_file(credentials_file, CREDENTIALS_WHAT, max_bytes=4096)
            user, password = parse_credentials(data, credentials_file)
        for path, what, private in (
            (tls_ca_file, "ZooKeeper TLS CA file", False),
            (tls_cert_file, "ZooKeeper TLS certificate", False),
            (tls_key_file, "ZooKeeper TLS key", True),
        ):
            if path is not None:
                read_secret_file(path, what, private=private)
    except SecretFileError as exc:
        raise ZooKeeperAccessError(str(exc)) from None
    return ZooKeeperAccess(user, password, tls_ca_file, tls_cert_file, tls_key_file)


def secure_group(
    client: Any, access: ZooKeeperAccess, znode: Callable[..., str], wait: Callable[[Any], Any]
) -> list[str]:
    """Give every znode of a group (``znode(*names)`` names them; ``wait`` is the handle's
        request) that lets anyone write the group's ACL (a group created without credentials,
        or by a version that set none): any client may change an open znode's ACL, so this node
        may too. PermissionError if a znode belongs to another identity (a credentials file
    naming another user or password). The znodes tightened are returned."""
    acl = access.acl()
    if acl is None:
        return []
    znodes = [znode()] + [
        znode(name) for name in ("epoch", "holder", "lock", "paused", "switchover")
    ]
    for folder in ("epochs", "nodes"):
        znodes.append(znode(folder))
        try:
            children = wait(client.get_children_async(znode(folder)))
        except NoNodeError:
            continue
        znodes.extend(znode(folder, child) for child in children)
    asked = [(path, client.get_acls_async(path)) for path in znodes]
    tightened = []
    for path, answer in asked:
        try:
            found, _ = wait(answer)
        except NoNodeError:
            continue
        if access.admits(found):
            continue
        if not open_to_anyone(found):
            raise PermissionError(
                errno.EACCES,
                f"the group's znode {path} belongs to another ZooKeeper identity "
                f"({', '.join(f'{e.id.scheme}:{e.id.id}' for e in found)}): the "
                f"credentials file names another user or password than the one that "
                "created the group",
            )
        try:
            wait(client.set_acls_async(path, acl))
        except NoNodeError:
            continue
        tightened.append(path)
    if tightened:
        log.warning("gave %d open znodes the group's ACL: %s", len(tightened), tightened)
    return tightened
