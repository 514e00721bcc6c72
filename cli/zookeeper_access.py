"""``primacy run``'s check of how a node reaches its ZooKeeper ensemble and who it is there,
made before the node starts (docs/operator-guide.md, "ZooKeeper access"; the codes are the
``ZOOKEEPER_*`` of ``cli/codes.py``).

- No ``zookeeper_credentials_file``: refused, since every znode the group creates would be
  open to any client of the ensemble, unless the operator says so with
  ``zookeeper_allow_open_acl = true`` (then a warning at each start).
- A credentials, CA, certificate or key file that is missing, not private, or malformed:
  refused. No TLS: a warning, since digest credentials then cross the network in the clear.
- With credentials, the group's znodes are checked on the ensemble: those an earlier node
  left open to anyone get the group's ACL (a warning naming them; an open znode's ACL may
  be changed by any client, so by this one); znodes another identity owns refuse the start.
  An ensemble that cannot be reached now is no reason to refuse: the node's own session
  does the same once connected.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from primacy.cli import codes

if TYPE_CHECKING:
    from primacy.share.zookeeper_access import ZooKeeperAccess
    from primacy.supervisor.config import NodeConfig

log = logging.getLogger("primacy.cli")
# How long the check waits for a session: a start is not held up for an ensemble that is down.
CONNECT_WAIT_S = 5.0


def judge_zookeeper_access(config: NodeConfig) -> str | None:
    """Why the node must not start (one line with its code), or None."""
    if config.coordination != "zookeeper":
        return None
    from primacy.share.zookeeper_access import ZooKeeperAccessError
    from primacy.supervisor.shell.coordination import zookeeper_access

    try:
        access = zookeeper_access(config)
    except ZooKeeperAccessError as exc:
        return f"{codes.ZOOKEEPER_ACCESS_REFUSED} {exc}"
    if not access.authenticated:
        if not config.zookeeper_allow_open_acl:
            return (
                f"{codes.ZOOKEEPER_OPEN_ACL_REFUSED} no zookeeper_credentials_file: every znode "
                "of the group would be open to any client of the ensemble, which could delete "
                "the master's lock, plant epochs or pause the group; give the group a digest "
                'identity (docs/operator-guide.md, "ZooKeeper access"), or set '
                "zookeeper_allow_open_acl = true for a trusted, isolated ensemble"
            )
        log.warning(
            "%s zookeeper_allow_open_acl = true: the group's znodes under %s are open to every "
            "client of the ensemble",
            codes.ZOOKEEPER_OPEN_ACL,
            config.zookeeper_path,
        )
    if not access.tls:
        log.warning(
            "%s the connection to ZooKeeper (%s) is plaintext: set zookeeper_tls_ca_file to use "
            "the ensemble's secureClientPort%s",
            codes.ZOOKEEPER_PLAINTEXT,
            config.zookeeper_hosts,
            "; the digest credentials cross the network in the clear" if access.user else "",
        )
    if not access.authenticated:
        return None
    return _secure_group(config, access)


def _secure_group(config: NodeConfig, access: ZooKeeperAccess) -> str | None:
    from primacy.share.factory import open_zookeeper
    from primacy.supervisor.shell.coordination import group_location

    port = open_zookeeper(
        replace(group_location(config), access=access),
        session_timeout_s=config.zookeeper_session_timeout_ms / 1000,
        request_timeout_s=CONNECT_WAIT_S,  # also how long it waits for a session
        secure_group=True,
    )
    try:
        if port.session_state != "connected":
            log.info("ZooKeeper not reached yet: the node checks the group's ACLs once it is")
            return None
        try:
            tightened = port.secure_group()
        except PermissionError as exc:
            return (
                f"{codes.ZOOKEEPER_NOT_ADMITTED} {exc.strerror}: give the node the group's "
                "credentials, or, for a new group, another zookeeper_path"
            )
        except OSError as exc:
            log.info("the group's ACLs were not checked before the start: %s", exc)
            return None
        if tightened:
            log.warning(
                "%s %d znodes of the group were open to every client of the ensemble and now "
                "carry the group's ACL (digest user %r, world read): %s",
                codes.ZOOKEEPER_ACL_TIGHTENED,
                len(tightened),
                access.user,
                ", ".join(tightened),
            )
        return None
    finally:
        port.close()
