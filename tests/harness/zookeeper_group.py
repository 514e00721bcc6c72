"""A group of real ``primacy run`` nodes on a local share whose lock and epochs are on a ZooKeeper
ensemble (``coordination = "zookeeper"``), each node with STOMP on a fixed port and, if asked,
its own proxies to the ensemble so a test can cut that node's ZooKeeper connection alone."""

from __future__ import annotations

import uuid

from kazoo.client import KazooClient

from primacy.cli.localgroup import Group, NodeProcess, wait_until
from tests.harness.tcp_proxy import TcpProxy
from tests.harness.traffic import StompGroup
from tests.harness.zookeeper import Ensemble

# The tests' ensemble ticks every 200 ms, so it grants 0.4 to 4 s; a production ensemble
# (tickTime 2000) grants 4 to 40 s, and the config's default asks for 10 s.
SESSION_TIMEOUT_MS = 2000


def zookeeper_args(
    hosts: str, path: str, session_timeout_ms: int, ensemble: Ensemble
) -> tuple[str, ...]:
    """A node's flags: the ensemble's TLS ports (or proxies to them), its credentials and
    certificates."""
    return (
        *ensemble.node_args(),
        "--coordination",
        "zookeeper",
        "--zookeeper-hosts",
        hosts,
        "--zookeeper-path",
        path,
        "--zookeeper-session-timeout-ms",
        str(session_timeout_ms),
    )


def stranger_client(ensemble: Ensemble, *, authenticated: bool = False) -> KazooClient:
    """A started kazoo client outside the nodes: without credentials on the plaintext port (anyone
    on the network), or ``authenticated`` as the group's own identity over TLS (a member gone
    rogue, which ACLs cannot stop). The caller stops and closes it."""
    if authenticated:
        client = KazooClient(hosts=ensemble.hosts, timeout=5, **ensemble.access.kazoo_options())
    else:
        client = KazooClient(hosts=ensemble.plain_hosts, timeout=5)
    client.start(timeout=30)
    return client


class ZooKeeperGroup:
    """Nodes n1..nN on ``group``'s share and one group znode of their own.

    Started one by one, n1 first and master before the others start. ``proxied``: each
    node reaches every server through proxies of its own (``cut``/``heal``)."""

    def __init__(
        self,
        group: Group,
        ensemble: Ensemble,
        count: int = 2,
        *,
        proxied: bool = False,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        stomp_host: str = "127.0.0.1",
        master_timeout_s: float = 30.0,
    ) -> None:
        self.group = group
        self.ensemble = ensemble
        self.path = f"/primacy-{uuid.uuid4().hex[:12]}"
        self.proxies: dict[str, list[TcpProxy]] = {}
        hosts: dict[str, str] = {}
        for index in range(1, count + 1):
            node_id = f"n{index}"
            if proxied:
                self.proxies[node_id] = [TcpProxy(s.secure_port) for s in ensemble.servers]
                hosts[node_id] = ",".join(p.address for p in self.proxies[node_id])
            else:
                hosts[node_id] = ensemble.hosts
        self.stomp = StompGroup(
            lambda node_id, *args: group.start(
                node_id,
                *args,
                *zookeeper_args(hosts[node_id], self.path, session_timeout_ms, ensemble),
            ),
            count,
            start_now=False,
            stomp_host=stomp_host,
        )
        self.url = self.stomp.url
        try:
            first = self.stomp.start("n1")
            assert group.wait_for_master(master_timeout_s) is first
            for index in range(2, count + 1):
                node = self.stomp.start(f"n{index}")
                wait_until(
                    lambda node=node: node.status("/slave") == 200, 30, f"{node.node_id} a slave"
                )
        except BaseException:
            self.close()
            raise

    @property
    def nodes(self) -> dict[str, NodeProcess]:
        return self.stomp.nodes

    def cli_args(self, *, credentials: bool = True) -> tuple[str, ...]:
        """The flags that point ``primacy status``, ``cluster`` or ``epochs raise`` at this
        group: the ensemble over TLS, the group's path, and (to write) its credentials."""
        ensemble = self.ensemble
        return (
            "--zookeeper",
            ensemble.hosts,
            "--zookeeper-path",
            self.path,
            *(ensemble.node_args() if credentials else ensemble.tls_args()),
        )

    def cut(self, node: NodeProcess) -> None:
        """Cut ``node`` from every ZooKeeper server (its share and ports stay reachable)."""
        for proxy in self.proxies[node.node_id]:
            proxy.cut()

    def heal(self, node: NodeProcess) -> None:
        for proxy in self.proxies[node.node_id]:
            proxy.heal()

    def wait_until_serving_again(self, timeout_s: float = 60.0) -> NodeProcess:
        """After a fault: every node answers and exactly one is master."""
        for node in self.nodes.values():
            wait_until(
                lambda node=node: node.status("/health") == 200, timeout_s, f"{node.node_id} up"
            )
        return self.group.wait_for_master(timeout_s)

    def close(self) -> None:
        """The proxies' threads (the nodes are the ``Group``'s to kill)."""
        for proxies in self.proxies.values():
            for proxy in proxies:
                proxy.close()
