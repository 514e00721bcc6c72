"""The keys of coordination: whether the lock and the epochs live in the share or on ZooKeeper.

``NodeConfig`` (``config/__init__.py``) inherits them; docs/operator-guide.md,
"Coordination on ZooKeeper", shows them at work, and docs/safety.md says why the
session timeout must outlast the keepalive.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from primacy.store.config_keys import Bool, Int, key

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
    zookeeper_credentials_file: Path | None = key(
        None,
        "a file holding USER:PASSWORD, the group's ZooKeeper digest identity: every znode the "
        "node creates can be changed by that identity only (mode 600, owned by root or the "
        "node's user)",
        metavar="FILE",
    )
    zookeeper_allow_open_acl: Bool = key(
        False,
        "run without zookeeper_credentials_file, the group's znodes open to every client of the "
        "ensemble (anyone who reaches it can delete the lock or pause the group): only for a "
        "trusted, isolated ensemble",
    )
    zookeeper_tls_ca_file: Path | None = key(
        None,
        "connect to the ensemble's secureClientPort over TLS, trusting servers whose "
        "certificate this CA (PEM) signed for the host named in zookeeper_hosts",
        metavar="FILE",
    )
    zookeeper_tls_cert_file: Path | None = key(
        None,
        "the client certificate (PEM) to present to the ensemble (with zookeeper_tls_key_file; "
        "an ensemble with ssl.clientAuth=need, ZooKeeper's default, requires one)",
        metavar="FILE",
    )
    zookeeper_tls_key_file: Path | None = key(
        None,
        "the client certificate's private key (PEM, unencrypted, mode 600)",
        metavar="FILE",
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
            for name in ("zookeeper_hosts", *_ACCESS_KEYS):
                if getattr(self, name) not in (None, False):
                    raise ValueError(
                        f'{name} is set but coordination is "share": set '
                        f'coordination = "zookeeper" to use the ensemble, or drop {name}'
                    )
            return
        self._check_zookeeper_access()
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

    def _check_zookeeper_access(self) -> None:
        """The rules between the credentials and TLS keys (files are read at the node's start,
        ``primacy.share.zookeeper_access.load_access``)."""
        if self.zookeeper_credentials_file is not None and self.zookeeper_allow_open_acl:
            raise ValueError(
                "zookeeper_allow_open_acl = true and zookeeper_credentials_file contradict each "
                "other: with credentials the group's znodes are closed to others; drop one"
            )
        if (self.zookeeper_tls_cert_file is None) != (self.zookeeper_tls_key_file is None):
            raise ValueError(
                "zookeeper_tls_cert_file and zookeeper_tls_key_file go together: give both"
            )
        if self.zookeeper_tls_cert_file is not None and self.zookeeper_tls_ca_file is None:
            raise ValueError(
                "zookeeper_tls_cert_file needs zookeeper_tls_ca_file: TLS is on only with a CA "
                "to check the ensemble's servers against"
            )


# The keys that say how a node reaches the ensemble and who it is there.
_ACCESS_KEYS = (
    "zookeeper_credentials_file",
    "zookeeper_allow_open_acl",
    "zookeeper_tls_ca_file",
    "zookeeper_tls_cert_file",
    "zookeeper_tls_key_file",
)
