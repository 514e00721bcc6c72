"""The doctor's check of a ZooKeeper ensemble: its servers reachable and in a quorum, its timeouts.

Each server is asked on its own for a session: a ZooKeeper server grants one
only while it serves in a quorum (a server cut off from the rest refuses
clients), so a session from a server is proof that it is reachable and part of
a quorum. The session timeout it grants (clamped by the server's
``minSessionTimeout``/``maxSessionTimeout``) is compared with the one asked for
and with the keepalive (docs/safety.md, "Coordination on ZooKeeper").

``check_access`` judges who the nodes are to the ensemble: a credentials file that
is missing or open to others, a plaintext connection, and the group's znodes that
let anyone but the group's identity write (docs/operator-guide.md, "ZooKeeper access").
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from primacy.nfs_profiles import codes
from primacy.nfs_profiles.findings import Finding, Severity

if TYPE_CHECKING:
    from primacy.share.zookeeper_access import ZooKeeperAccess

CONNECT_TIMEOUT_S = 5.0


def granted_session_timeout_s(
    server: str,
    asked_s: float,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    access: ZooKeeperAccess | None = None,
) -> float | str:
    """The session timeout ``server`` alone grants when asked for ``asked_s``, or why none."""
    from kazoo.client import KazooClient  # type: ignore[import-untyped]
    from kazoo.handlers.threading import KazooTimeoutError  # type: ignore[import-untyped]

    from primacy.share.zookeeper_watch import watch_granted_timeout

    options = access.kazoo_options() if access is not None else {}
    client = KazooClient(hosts=server, timeout=asked_s, connection_retry=None, **options)
    granted = watch_granted_timeout(client)
    try:
        client.start(timeout=connect_timeout_s)
    except KazooTimeoutError:
        return f"no session within {connect_timeout_s:g} s: unreachable, or not in a quorum"
    except Exception as exc:  # a name that does not resolve, a refused connection
        return f"no session: {exc}"
    try:
        # kazoo reports the session before its connect step returns (digest credentials are
        # sent in between), and the granted timeout is noted on that return.
        deadline = time.monotonic() + connect_timeout_s
        while not granted and time.monotonic() < deadline:
            time.sleep(0.01)
        return granted[-1] if granted else "a session, but no timeout granted in time"
    finally:
        client.stop()
        client.close()


def check_ensemble(
    hosts: str,
    session_timeout_s: float,
    keep_alive_s: float,
    drift_margin: float,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    access: ZooKeeperAccess | None = None,
) -> tuple[Finding, ...]:
    """The findings on the ensemble ``hosts`` ("h1:2181,h2:2181,h3:2181")."""
    servers = [server.strip() for server in hosts.split(",") if server.strip()]
    findings: list[Finding] = []
    granted: list[float] = []
    for server in servers:
        answer = granted_session_timeout_s(server, session_timeout_s, connect_timeout_s, access)
        if isinstance(answer, str):
            findings.append(
                Finding(
                    Severity.WARNING,
                    server,
                    answer,
                    codes.ZOOKEEPER_SERVER_UNAVAILABLE,
                    "a server that grants no session cannot serve the group's nodes",
                    "check that the server runs, that this host reaches its client port, and "
                    "that it has joined the quorum (its log, or `echo srvr | nc HOST PORT`)",
                )
            )
        else:
            granted.append(answer)
    if len(granted) <= len(servers) // 2:
        findings.append(
            Finding(
                Severity.REFUSED,
                hosts,
                f"{len(granted)} of {len(servers)} servers serve: no quorum",
                codes.ZOOKEEPER_NO_QUORUM,
                "without a quorum no node can take the lock or pass a lease check: the group "
                "has no master",
                "bring a majority of the servers up and in reach of each other",
            )
        )
        return tuple(findings)
    shortest = min(granted)
    if abs(shortest - session_timeout_s) > 0.001:
        findings.append(
            Finding(
                Severity.WARNING,
                hosts,
                f"asked for a {session_timeout_s:g} s session, granted {shortest:g} s",
                codes.ZOOKEEPER_SESSION_TIMEOUT_CLAMPED,
                "the ensemble clamps session timeouts to 2 to 20 of its tickTimes (or its "
                "minSessionTimeout and maxSessionTimeout)",
                "ask for a timeout within the ensemble's bounds, or change its bounds",
            )
        )
    needed = keep_alive_s * (1 + drift_margin)
    if shortest < needed:
        findings.append(
            Finding(
                Severity.REFUSED,
                hosts,
                f"the session timeout granted ({shortest:g} s) is shorter than the keepalive "
                f"period plus {drift_margin:.0%} ({needed:g} s)",
                codes.ZOOKEEPER_SESSION_SHORTER_THAN_KEEPALIVE,
                "a master cut off from the ensemble could still claim the role when its "
                "session expires and another node takes the lock",
                "raise zookeeper_session_timeout_ms (and the ensemble's maxSessionTimeout), or "
                "shorten lock_keep_alive_period_ms",
            )
        )
    if not findings:
        findings.append(
            Finding(
                Severity.OK,
                hosts,
                f"{len(granted)} of {len(servers)} servers serve; session timeout "
                f"{shortest:g} s, keepalive {keep_alive_s:g} s",
            )
        )
    return tuple(findings)


def check_access(
    hosts: str,
    path: str,
    credentials_file: Path | None,
    tls_files: tuple[Path | None, Path | None, Path | None] = (None, None, None),
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> tuple[tuple[Finding, ...], ZooKeeperAccess | None]:
    """The findings on the nodes' access to ``hosts``: their credentials file, TLS, and the ACLs
    of the group's znodes under ``path``; and the access to check the ensemble with (None if
    a file is unusable)."""
    from primacy.share.zookeeper_access import ZooKeeperAccessError, load_access

    findings: list[Finding] = []
    try:
        access = load_access(credentials_file, *tls_files)
    except ZooKeeperAccessError as exc:
        return (
            Finding(
                Severity.REFUSED,
                str(credentials_file or hosts),
                str(exc),
                codes.ZOOKEEPER_CREDENTIALS_UNUSABLE,
                "a node refuses to start on a credentials or TLS file it cannot trust",
                'fix the file as the message says (docs/operator-guide.md, "ZooKeeper access")',
            ),
        ), None
    if not access.authenticated:
        findings.append(
            Finding(
                Severity.WARNING,
                hosts,
                "no --zookeeper-credentials-file: the group's identity is not checked",
                codes.ZOOKEEPER_NO_CREDENTIALS,
                "a node without credentials creates znodes any client of the ensemble may "
                "delete or rewrite (it starts only with zookeeper_allow_open_acl = true)",
                "give the nodes' zookeeper_credentials_file here too",
            )
        )
    if not access.tls:
        findings.append(
            Finding(
                Severity.WARNING,
                hosts,
                "no --zookeeper-tls-ca-file: the connection to the ensemble is plaintext",
                codes.ZOOKEEPER_PLAINTEXT,
                "digest credentials and every record cross the network readable, and anyone "
                "on the path can stand in for a server",
                "enable the ensemble's secureClientPort and set zookeeper_tls_ca_file",
            )
        )
    open_znodes = _open_znodes(hosts, path, access, connect_timeout_s)
    if isinstance(open_znodes, str):
        findings.append(
            Finding(
                Severity.WARNING,
                f"{path} on {hosts}",
                f"the group's ACLs were not read: {open_znodes}",
                codes.ZOOKEEPER_SERVER_UNAVAILABLE,
                "the doctor cannot say whether strangers may change the group's znodes",
                "check that the ensemble answers (and the TLS files match its certificates)",
            )
        )
    elif open_znodes:
        shown = ", ".join(open_znodes[:5]) + (" ..." if len(open_znodes) > 5 else "")
        findings.append(
            Finding(
                Severity.REFUSED,
                f"{path} on {hosts}",
                f"{len(open_znodes)} znodes of the group let any client write: {shown}",
                codes.ZOOKEEPER_OPEN_ACL,
                "any client of the ensemble can delete the master's lock, plant epochs or pause "
                "the group, without credentials",
                "start a node with zookeeper_credentials_file: it gives the group's open znodes "
                "its ACL",
            )
        )
    return tuple(findings), access


def _open_znodes(
    hosts: str, path: str, access: ZooKeeperAccess, connect_timeout_s: float
) -> list[str] | str:
    """The group's znodes whose ACL lets anyone write (none if no group uses ``path``), or
    why they could not be read."""
    from kazoo.client import KazooClient  # type: ignore[import-untyped]
    from kazoo.exceptions import KazooException, NoNodeError  # type: ignore[import-untyped]
    from kazoo.handlers.threading import KazooTimeoutError  # type: ignore[import-untyped]

    from primacy.share.zookeeper_access import open_to_anyone

    client = KazooClient(hosts=hosts, connection_retry=None, **access.kazoo_options())
    try:
        client.start(timeout=connect_timeout_s)
    except KazooTimeoutError:
        return f"no session within {connect_timeout_s:g} s"
    except Exception as exc:  # a name that does not resolve, a TLS handshake refused
        return f"no session: {exc}"
    try:
        znodes = [path] + [f"{path}/{name}" for name in ("epoch", "holder", "lock", "paused")]
        for folder in ("epochs", "nodes"):
            znodes.append(f"{path}/{folder}")
            try:
                znodes += [f"{path}/{folder}/{c}" for c in client.get_children(f"{path}/{folder}")]
            except NoNodeError:
                pass
        found = []
        for znode in znodes:
            try:
                if open_to_anyone(client.get_acls(znode)[0]):
                    found.append(znode)
            except NoNodeError:
                continue
        return found
    except KazooException as exc:
        return f"reading the ACLs failed: {exc!r}"
    finally:
        client.stop()
        client.close()
