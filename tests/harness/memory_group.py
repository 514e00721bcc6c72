"""Nodes in this process on an in-memory share: the role logic and the HTTP surface, fast.

Each node is a real ``Node`` (role loop, lock I/O worker, registry thread, HTTP
server on a free loopback port, journal on a real directory), run on a thread
of the test process; the lock, the epochs, the registry and the markers live in
one ``MemoryShare`` (``share/memory.py``), whose ``steal_lock`` and ``failing``
make the faults a shared filesystem makes (an expired lease, a hung mount) on
demand. What only real processes show (signals, guardians, SIGKILL, FUSE
faults, HAProxy) stays with ``Group`` and real ``primacy run`` processes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primacy.cli.localgroup import free_port, http_status, wait_until
from primacy.share.memory import MemoryShare
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.shell.node import Node

# Short timings, so a test takes a second or two (the same rules as any config).
FAST: dict[str, Any] = {
    "lock_acquire_sleep_interval_ms": 50,
    "lock_keep_alive_period_ms": 200,
    "registry_refresh_ms": 200,
}


@dataclass
class InProcessNode:
    """One node on a thread of this process; the attributes ``MasterPoller`` reads."""

    node: Node
    thread: threading.Thread
    port: int
    exit_codes: list[int] = field(default_factory=list)

    @property
    def node_id(self) -> str:
        return self.node.config.node_id

    def alive(self) -> bool:
        return self.thread.is_alive()

    def status(self, path: str = "/master", timeout_s: float = 1.0) -> int | None:
        return http_status(self.port, path, timeout_s)

    def is_master(self) -> bool:
        return self.status("/master") == 200

    def role(self) -> str:
        return str(self.node.snapshot().role)

    def epoch(self) -> int | None:
        return self.node.snapshot().epoch

    def stop(self, timeout_s: float = 15.0) -> None:
        """A graceful stop, as SIGTERM asks for one."""
        if self.thread.is_alive():
            self.node.request_stop("test over")
            self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"node {self.node_id} did not stop"


class MemoryGroup:
    """Nodes sharing one ``MemoryShare``; their journal lives in ``journal_root``."""

    def __init__(self, journal_root: Path) -> None:
        self.share = MemoryShare()
        self.journal_root = journal_root
        self.nodes: dict[str, InProcessNode] = {}

    def start(self, node_id: str, admin_token: str | None = None, **keys: Any) -> InProcessNode:
        port = free_port()
        config = NodeConfig(
            node_id=node_id,
            share=self.journal_root,
            http=f"127.0.0.1:{port}",
            **{**FAST, **keys},
        )
        node = Node(config, admin_token=admin_token, share_port=self.share.handle())
        exit_codes: list[int] = []
        thread = threading.Thread(
            target=lambda: exit_codes.append(node.run()), name=f"test-node-{node_id}"
        )
        started = InProcessNode(node, thread, port, exit_codes)
        thread.start()
        self.nodes[node_id] = started
        wait_until(lambda: started.status("/health") == 200, 15, f"{node_id} to answer")
        return started

    def masters(self) -> list[str]:
        return [n.node_id for n in self.nodes.values() if n.alive() and n.is_master()]

    def wait_for_master(self, timeout_s: float = 15.0) -> InProcessNode:
        found: list[str] = []

        def one_master() -> bool:
            found[:] = self.masters()
            return len(found) == 1

        wait_until(one_master, timeout_s, "exactly one node to answer 200 on /master")
        return self.nodes[found[0]]

    def close(self) -> None:
        for node in self.nodes.values():
            node.stop()
