"""The keys of coordination: whether the lock and the epochs live in the share or on ZooKeeper.

``NodeConfig`` (``config/__init__.py``) inherits them; docs/operator-guide.md,
"Coordination on ZooKeeper", shows them at work, and docs/safety.md says why the
session timeout must outlast the keepalive.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from primacy.store.config_keys import Int, key

# A znode path: absolute, no empty, "." or ".." component, no trailing slash; ZooKeeper keeps
# /zookeeper for itself.
_ZNODE_PATH = re.compile(r"(/[A-Za-z0-9_.-]+)+")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})")


class CoordinationKeys(BaseModel):
    """Which service decides who is master: the share (its lock file and ``epochs/``) or
    ZooKeeper (a session lease and an epoch counter); the journal stays on the share."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    coordination: Literal["share", "zookeeper"] = key(
        "share",
        "where the lock and the epochs live: the share's files, or a ZooKeeper ensemble "
        "(zookeeper_hosts); the journal stays on the share",
    )
    zookeeper_hosts: str | None = key(
        None,
        "the ensemble's servers, HOST:PORT,HOST:PORT,... (coordination = zookeeper)",
        metavar="HOSTS",
    )
    zookeeper_path: str = key(
        "/primacy",
        "the group's znode; every group on one ensemble needs its own",
        metavar="PATH",
    )
    zookeeper_session_timeout_ms: Int = key(
        10_000,
        "the ZooKeeper session timeout asked for: a node cut off or frozen loses the lock this "
        "long after the ensemble last heard from it; longer than the keepalive period",
        metavar="MS",
        ge=1000,
        le=600_000,
    )

    @field_validator("zookeeper_hosts")
    @classmethod
    def _hosts_are_host_ports(cls, value: str | None) -> str | None:
        if value is None:
            return None
        servers = value.split(",")
        for server in servers:
            match = _HOST_PORT.fullmatch(server.strip())
            if match is None or not 0 < int(match.group(2)) < 65536:
                raise ValueError(
                    f"{server.strip()!r} is not HOST:PORT: give the servers as "
                    '"zk1:2181,zk2:2181,zk3:2181" (the group\'s path goes in zookeeper_path)'
                )
        return ",".join(server.strip() for server in servers)

    @field_validator("zookeeper_path")
    @classmethod
    def _path_is_a_znode(cls, value: str) -> str:
        parts = value.split("/")[1:]
        if (
            not _ZNODE_PATH.fullmatch(value)
            or any(part in (".", "..") for part in parts)
            or parts[0] == "zookeeper"
        ):
            raise ValueError(
                "give an absolute znode path of letters, digits, '_', '-' and '.', such as "
                '"/primacy/orders" (not under /zookeeper, which the ensemble keeps)'
            )
        return value

    def check_coordination(self, lock_keep_alive_period_ms: int, drift_margin: float) -> None:
        """The rules between these keys and the keepalive (``NodeConfig`` calls it)."""
        if self.coordination != "zookeeper":
            if self.zookeeper_hosts is not None:
                raise ValueError(
                    'zookeeper_hosts is set but coordination is "share": set '
                    'coordination = "zookeeper" to use the ensemble, or drop zookeeper_hosts'
                )
            return
        if self.zookeeper_hosts is None:
            raise ValueError(
                'coordination = "zookeeper" needs zookeeper_hosts, the ensemble\'s servers '
                '("zk1:2181,zk2:2181,zk3:2181")'
            )
        needed = lock_keep_alive_period_ms * (1 + drift_margin)
        if self.zookeeper_session_timeout_ms < needed:
            raise ValueError(
                f"zookeeper_session_timeout_ms ({self.zookeeper_session_timeout_ms}) must be at "
                f"least lock_keep_alive_period_ms ({lock_keep_alive_period_ms}) plus "
                f"{drift_margin:.0%}: a master cut off from ZooKeeper must have stopped "
                "claiming the role before the ensemble expires its session and frees the lock "
                "(docs/safety.md)"
            )
        if importlib.util.find_spec("kazoo") is None:
            raise ValueError(
                'coordination = "zookeeper" needs the kazoo package: '
                "pip install 'primacy[zookeeper]'"
            )
