"""The doctor's check of a ZooKeeper ensemble: its servers reachable and in a quorum, its timeouts.

Each server is asked on its own for a session: a ZooKeeper server grants one
only while it serves in a quorum (a server cut off from the rest refuses
clients), so a session from a server is proof that it is reachable and part of
a quorum. The session timeout it grants (clamped by the server's
``minSessionTimeout``/``maxSessionTimeout``) is compared with the one asked for
and with the keepalive (docs/safety.md, "Coordination on ZooKeeper").
"""

from __future__ import annotations

from primacy.nfs_profiles import codes
from primacy.nfs_profiles.findings import Finding, Severity

CONNECT_TIMEOUT_S = 5.0


def granted_session_timeout_s(
    server: str, asked_s: float, connect_timeout_s: float = CONNECT_TIMEOUT_S
) -> float | str:
    """The session timeout ``server`` alone grants when asked for ``asked_s``, or why none."""
    from kazoo.client import KazooClient  # type: ignore[import-untyped]
    from kazoo.handlers.threading import KazooTimeoutError  # type: ignore[import-untyped]

    from primacy.share.zookeeper_watch import watch_granted_timeout

    client = KazooClient(hosts=server, timeout=asked_s, connection_retry=None)
    granted = watch_granted_timeout(client)
    try:
        client.start(timeout=connect_timeout_s)
    except KazooTimeoutError:
        return f"no session within {connect_timeout_s:g} s: unreachable, or not in a quorum"
    except Exception as exc:  # a name that does not resolve, a refused connection
        return f"no session: {exc}"
    try:
        return granted[-1]
    finally:
        client.stop()
        client.close()


def check_ensemble(
    hosts: str,
    session_timeout_s: float,
    keep_alive_s: float,
    drift_margin: float,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> tuple[Finding, ...]:
    """The findings on the ensemble ``hosts`` ("h1:2181,h2:2181,h3:2181")."""
    servers = [server.strip() for server in hosts.split(",") if server.strip()]
    findings: list[Finding] = []
    granted: list[float] = []
    for server in servers:
        answer = granted_session_timeout_s(server, session_timeout_s, connect_timeout_s)
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
