"""Emulated NFS hosts on one backing directory, and nodes on them (fixture: tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from tests.harness.group import Group, NodeProcess
from tests.harness.nfsemu import EmulatedHost


def fuse_unavailable_reason() -> str | None:
    """Why FUSE tests cannot run here, or None. Only these two reasons may skip them."""
    if not Path("/dev/fuse").exists():
        return "/dev/fuse is missing (run with --device /dev/fuse)"
    if os.geteuid() != 0:
        return "the FUSE fault tests need root (they mount filesystems)"
    return None


class FuseHost(Protocol):
    """A host whose share is a FUSE mount: the emulator's or the real NFS tier's."""

    @property
    def share(self) -> Path: ...

    def fail_all(self) -> None: ...

    def stop(self) -> None: ...


HostT = TypeVar("HostT", bound=FuseHost)


class HostsWithNodes(Generic[HostT]):
    """Hosts on one server, and supervisor nodes on their mounts.

    Owns everything it starts and tears it down in the only safe order: fail
    every pending operation on every mount (a process blocked in a hung FUSE
    request cannot die, even from SIGKILL), kill the nodes by pid, then
    unmount and kill each daemon by pid.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hosts: list[HostT] = []
        self._groups: list[Group] = []

    def start_node(
        self, host: HostT, node_id: str, *extra: str, env: dict[str, str] | None = None
    ) -> NodeProcess:
        """Start a supervisor on ``host``: its share is the host's mount point."""
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        group = Group(share=host.share, log_dir=logs)
        self._groups.append(group)
        return group.start(node_id, *extra, env=env)

    def close(self) -> None:
        for host in self.hosts:
            host.fail_all()
        try:
            for group in self._groups:
                group.close()
        finally:  # a node that would not die must not also leave every mount behind
            for host in self.hosts:
                host.stop()


class EmulatedHosts(HostsWithNodes[EmulatedHost]):
    """Emulated hosts sharing ``backing``, and supervisor nodes on their mounts."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.backing = root / "server"
        self.backing.mkdir(parents=True, exist_ok=True)

    def __call__(self, count: int, lease_s: float = 1.0) -> list[EmulatedHost]:
        """Start ``count`` more hosts, each with its own mount of the shared backing directory."""
        started = []
        for _ in range(count):
            name = chr(ord("a") + len(self.hosts))
            host = EmulatedHost.start(
                self.backing,
                self.root / "hosts" / name,
                lease_s,
                log_path=self.root / f"nfsemu-{name}.log",
            )
            self.hosts.append(host)
            started.append(host)
        return started
