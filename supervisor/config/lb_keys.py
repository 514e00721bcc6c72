"""The keys of the push to load balancers: which HAProxies this node tells when it starts or
stops serving, and its server's name there.

``NodeConfig`` (``config.py``) inherits them; docs/operator-guide.md, "Load balancer:
HAProxy", shows them at work and docs/safety.md argues why a push is safe.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, field_validator

from primacy.store.config_keys import Int, key

_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_TCP = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}")


class LoadBalancerKeys(BaseModel):
    """Where this node's HAProxies listen for their runtime API, and what it is called there."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    haproxy_runtime_api: str | None = key(
        None,
        "the runtime API (stats socket, level admin) of each HAProxy in front of the group, "
        "comma-separated: unix:/PATH or HOST:PORT; this node marks its server up there the "
        "moment it serves (the backend's others down) and down the moment it stops",
        metavar="ADDRESS[,ADDRESS...]",
    )
    haproxy_backend: str = key(
        "primacy_stomp", "the HAProxy backend that holds the group's servers", metavar="NAME"
    )
    haproxy_server: str | None = key(
        None,
        "this node's server name in that backend",
        metavar="NAME",
        default_text="the node_id",
    )
    haproxy_timeout_ms: Int = key(
        500,
        "how long one push waits for an HAProxy to answer before it retries (every second); "
        "a push never delays a takeover",
        metavar="MS",
        ge=10,
        le=60_000,
    )

    @field_validator("haproxy_runtime_api")
    @classmethod
    def _addresses_are_sockets(cls, value: str | None) -> str | None:
        if value is None:
            return None
        for address in value.split(","):
            address = address.strip()
            path = address.removeprefix("unix:")
            if path.startswith("/") and "\x00" not in path:
                continue
            match = _TCP.fullmatch(address)
            if match is None or not 0 < int(address.rpartition(":")[2]) < 65536:
                raise ValueError(
                    f"{address!r} is no runtime API address: give unix:/PATH (for example "
                    "unix:/run/haproxy/admin.sock) or HOST:PORT, comma-separated"
                )
        return value

    @field_validator("haproxy_backend", "haproxy_server")
    @classmethod
    def _is_a_name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} is no HAProxy name: 1 to 64 letters, digits, '.', '_', ':' or '-'"
            )
        return value

    def haproxy_runtime_apis(self) -> list[str]:
        """Each configured runtime API address (none: no push)."""
        if self.haproxy_runtime_api is None:
            return []
        return [address.strip() for address in self.haproxy_runtime_api.split(",")]
