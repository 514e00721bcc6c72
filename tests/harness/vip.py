"""keepalived's virtual IP on one host, for tests/integration/test_keepalived_vip.py and
bench/vip_failover.py: three network namespaces (nothing of the host's own network changes),
a bridge in the client's, a primacy node (built-in broker on 0.0.0.0:61613, HTTP on
0.0.0.0:8008) and the operator guide's keepalived example in each of the other two, joined
by veth pairs. Needs root, ``ip`` and Debian's ``keepalived``; everything is removed by
``close``."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from primacy.cli.localgroup import http_status, wait_until
from tests.harness.guide_examples import guide_example, substitute

KEEPALIVED = shutil.which("keepalived")
ADDRESSES = {"node-a": "10.46.0.1", "node-b": "10.46.0.2"}
VIP = "10.46.0.100"
STOMP_PORT = 61613
CLONE_NEWNET = 0x40000000


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if KEEPALIVED is None or shutil.which("ip") is None:
        return "needs keepalived and ip (as root: apt-get install keepalived iproute2)"
    return None


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


class VipGroup:
    """Two nodes and their keepalived behind one address; ``tag`` names the namespaces
    (``{tag}c`` for the client, ``{tag}a`` and ``{tag}b``)."""

    def __init__(self, root: Path, tag: str) -> None:
        self.root = root
        self.client_ns = f"{tag}c"
        self.namespaces = {"node-a": f"{tag}a", "node-b": f"{tag}b"}
        self.share = root / "share"
        self.share.mkdir()
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}
        self.keepaliveds: list[subprocess.Popen[bytes]] = []
        self._make_network()
        # One thread in the client's namespace asks the nodes' HTTP endpoints (this process's
        # other threads stay where they are).
        self._client = concurrent.futures.ThreadPoolExecutor(
            1, initializer=self.enter_client_namespace
        )

    def _make_network(self) -> None:
        self._remove_network()
        client = self.client_ns
        sh("ip", "netns", "add", client)
        sh("ip", "-n", client, "link", "set", "lo", "up")
        sh("ip", "-n", client, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", client, "addr", "add", "10.46.0.254/24", "dev", "br0")
        sh("ip", "-n", client, "link", "set", "br0", "up")
        for node_id, namespace in self.namespaces.items():
            veth = f"v{node_id[-1]}"
            sh("ip", "netns", "add", namespace)
            sh("ip", "-n", namespace, "link", "set", "lo", "up")
            sh("ip", "-n", client, "link", "add", f"{veth}br", "type", "veth", "peer", "name", veth)
            sh("ip", "-n", client, "link", "set", veth, "netns", namespace)
            sh("ip", "-n", client, "link", "set", f"{veth}br", "master", "br0", "up")
            sh("ip", "-n", namespace, "addr", "add", f"{ADDRESSES[node_id]}/24", "dev", veth)
            sh("ip", "-n", namespace, "link", "set", veth, "up")

    def _remove_network(self) -> None:
        for namespace in [self.client_ns, *self.namespaces.values()]:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)

    def enter_client_namespace(self) -> None:
        """Move the calling thread into the client's namespace (threads it starts after
        inherit it). Python 3.11 has no os.setns: libc's."""
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        with open(f"/var/run/netns/{self.client_ns}") as handle:
            if libc.setns(handle.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")

    def in_client_namespace(self, *command: str) -> list[str]:
        return ["ip", "netns", "exec", self.client_ns, *command]

    def holds_vip(self, node_id: str) -> bool:
        out = subprocess.run(
            ["ip", "-n", self.namespaces[node_id], "-br", "addr"], capture_output=True, text=True
        ).stdout
        return f"{VIP}/" in out

    def held_twice(self) -> bool:
        """Both nodes held the address at one instant. Asked a, b, then a again: one reading
        of each after the other would also say so for a clean handover between the two
        (the old holder read before it let go, the new one after it took over)."""
        first, second = self.namespaces
        return self.holds_vip(first) and self.holds_vip(second) and self.holds_vip(first)

    def start(self) -> None:
        for node_id in self.namespaces:
            self.start_node(node_id)
            self.start_keepalived(node_id)

    def start_node(self, node_id: str) -> None:
        namespace = self.namespaces[node_id]
        with (self.root / f"{node_id}.log").open("ab") as log:
            self.nodes[node_id] = subprocess.Popen(
                [
                    *("ip", "netns", "exec", namespace, sys.executable, "-m", "primacy.cli"),
                    *("run", "--node-id", node_id, "--share", str(self.share)),
                    *("--http", "0.0.0.0:8008", "--stomp", f"0.0.0.0:{STOMP_PORT}"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def start_keepalived(self, node_id: str) -> None:
        namespace = self.namespaces[node_id]
        config = self.root / f"keepalived-{node_id}.conf"
        text = substitute(
            guide_example("Virtual IP: keepalived"),
            {"interface eth0": f"interface v{node_id[-1]}", "10.0.0.100/24": f"{VIP}/24"},
        )
        config.write_text(text)
        run = self.root / f"keepalived-{node_id}"
        run.mkdir(exist_ok=True)
        with (self.root / f"keepalived-{node_id}.log").open("ab") as log:
            self.keepaliveds.append(
                subprocess.Popen(
                    [
                        *("ip", "netns", "exec", namespace, KEEPALIVED or "keepalived"),
                        *("--dont-fork", "--log-console", "-f", str(config)),
                        *("-p", str(run / "k.pid"), "-r", str(run / "v.pid")),
                        *("-c", str(run / "c.pid")),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def status(self, node_id: str, path: str) -> int | None:
        return self._client.submit(http_status, 8008, path, 1.0, ADDRESSES[node_id]).result(10)

    def master(self) -> str:
        found: list[str] = []

        def one() -> bool:
            found[:] = [n for n in self.namespaces if self.status(n, "/master") == 200]
            return len(found) == 1

        wait_until(one, 30, "one master")
        return found[0]

    def settled(self) -> str:
        """One master holding the address alone, the other node a slave."""
        master = self.master()
        other = next(n for n in self.namespaces if n != master)
        wait_until(lambda: self.status(other, "/slave") == 200, 30, "a slave")
        wait_until(lambda: self.holds_vip(master), 30, "the address on the master")
        wait_until(lambda: not self.holds_vip(other), 30, "the address only there")
        return master

    def kill(self, node_id: str) -> float:
        """kill -9 of the node's supervisor (``ip netns exec`` execs it: the Popen's pid)."""
        process = self.nodes[node_id]
        killed_at = time.monotonic()
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        return killed_at

    def close(self) -> None:
        self._client.shutdown(wait=True)
        for process in [*self.nodes.values(), *self.keepaliveds]:
            if process.poll() is None:
                if process in self.keepaliveds:
                    process.terminate()
                else:
                    process.kill()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
        self._remove_network()
