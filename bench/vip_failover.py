"""kill -9 of the master -> first and third RECEIPT through keepalived's virtual IP (issue 46),
with the operator guide's keepalived example as operators copy it.

Needs root, ``ip`` and Debian's ``keepalived``. Three network namespaces, so nothing of the
host's own network changes: ``i46c`` holds a bridge and the client, ``i46a`` and ``i46b``
each one primacy node (built-in broker on 0.0.0.0:61613, HTTP on 0.0.0.0:8008) and one
keepalived, joined to the bridge by a veth pair. The virtual IP is 10.46.0.100. A stock
stomp.py producer (``bench/activemq/workload.py``) sends receipted messages to it; each kill
-9 of the master's supervisor is timed to the first and third RECEIPT after it, the killed
node is restarted, and both namespaces are sampled every 50 ms for the address held twice.
Everything (namespaces, processes) is removed at the end.

    python bench/vip_failover.py --kills 5
"""

from __future__ import annotations

import argparse
import ctypes
import http.client
import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.activemq.workload import FailoverSender, StockStompClient, drain
from primacy.cli.localgroup import wait_until
from tests.harness.guide_examples import guide_example, substitute

CLIENT_NS = "i46c"
NODES = {"node-a": ("i46a", "10.46.0.1"), "node-b": ("i46b", "10.46.0.2")}
VIP = "10.46.0.100"
QUEUE = "/queue/vip-failover"
CLONE_NEWNET = 0x40000000


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def make_network() -> None:
    sh("ip", "netns", "add", CLIENT_NS)
    sh("ip", "-n", CLIENT_NS, "link", "set", "lo", "up")
    sh("ip", "-n", CLIENT_NS, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", CLIENT_NS, "addr", "add", "10.46.0.254/24", "dev", "br0")
    sh("ip", "-n", CLIENT_NS, "link", "set", "br0", "up")
    for namespace, address in NODES.values():
        veth = f"v{namespace[-1]}"
        sh("ip", "netns", "add", namespace)
        sh("ip", "-n", namespace, "link", "set", "lo", "up")
        sh("ip", "-n", CLIENT_NS, "link", "add", f"{veth}br", "type", "veth", "peer", "name", veth)
        sh("ip", "-n", CLIENT_NS, "link", "set", veth, "netns", namespace)
        sh("ip", "-n", CLIENT_NS, "link", "set", f"{veth}br", "master", "br0", "up")
        sh("ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", veth)
        sh("ip", "-n", namespace, "link", "set", veth, "up")


def remove_network() -> None:
    for namespace in [CLIENT_NS, *(ns for ns, _ in NODES.values())]:
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def http_status(host: str, path: str) -> int | None:
    connection = http.client.HTTPConnection(host, 8008, timeout=1.0)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def holds_vip(namespace: str) -> bool:
    out = subprocess.run(
        ["ip", "-n", namespace, "-br", "addr"], capture_output=True, text=True
    ).stdout
    return f"{VIP}/" in out


class Bench:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.share = root / "share"
        self.share.mkdir()
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}
        self.keepaliveds: list[subprocess.Popen[bytes]] = []

    def start_node(self, node_id: str) -> None:
        namespace, _ = NODES[node_id]
        log = (self.root / f"{node_id}.log").open("ab")
        self.nodes[node_id] = subprocess.Popen(
            [
                *("ip", "netns", "exec", namespace, sys.executable, "-m", "primacy.cli", "run"),
                *("--node-id", node_id, "--share", str(self.share)),
                *("--http", "0.0.0.0:8008", "--stomp", "0.0.0.0:61613"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def start_keepalived(self, node_id: str) -> None:
        namespace, _ = NODES[node_id]
        config = self.root / f"keepalived-{node_id}.conf"
        text = substitute(
            guide_example("Virtual IP: keepalived"),
            {"interface eth0": f"interface v{namespace[-1]}", "10.0.0.100/24": f"{VIP}/24"},
        )
        config.write_text(text)
        run = self.root / node_id
        run.mkdir()
        log = (self.root / f"keepalived-{node_id}.log").open("ab")
        self.keepaliveds.append(
            subprocess.Popen(
                [
                    *("ip", "netns", "exec", namespace, "keepalived", "--dont-fork"),
                    *("--log-console", "-f", str(config), "-p", str(run / "k.pid")),
                    *("-r", str(run / "v.pid"), "-c", str(run / "c.pid")),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def status(self, node_id: str, path: str) -> int | None:
        return http_status(NODES[node_id][1], path)

    def master(self) -> str:
        found: list[str] = []

        def one() -> bool:
            found[:] = [n for n in NODES if self.status(n, "/master") == 200]
            return len(found) == 1

        wait_until(one, 30, "one master")
        return found[0]

    def settled(self) -> str:
        master = self.master()
        other = next(n for n in NODES if n != master)
        wait_until(lambda: self.status(other, "/slave") == 200, 30, "a slave")
        wait_until(lambda: holds_vip(NODES[master][0]), 30, "the address on the master")
        wait_until(lambda: not holds_vip(NODES[other][0]), 30, "the address only there")
        return master

    def kill(self, node_id: str) -> float:
        # ``ip netns exec`` execs the node: the Popen's pid is the supervisor's.
        process = self.nodes[node_id]
        killed_at = time.monotonic()
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        return killed_at

    def close(self) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("stomp.py").setLevel(logging.CRITICAL)
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces)")
    remove_network()
    make_network()
    # This process joins the client's namespace: the producer reaches the address there.
    # (os.setns is Python 3.12's; libc's, on this thread: the threads it starts inherit it.)
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/var/run/netns/{CLIENT_NS}") as handle:
        if libc.setns(handle.fileno(), CLONE_NEWNET) != 0:
            sys.exit(f"setns: {os.strerror(ctypes.get_errno())}")
    firsts: list[float] = []
    thirds: list[float] = []
    twice = [0, 0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            twice[1] += 1
            twice[0] += all(holds_vip(ns) for ns, _ in NODES.values())

    with tempfile.TemporaryDirectory(prefix="primacy-bench-vip-") as workdir:
        bench = Bench(Path(workdir))
        sender = None
        sampler = threading.Thread(target=sample, daemon=True)
        try:
            for node_id in NODES:
                bench.start_node(node_id)
                bench.start_keepalived(node_id)
            bench.settled()
            sender = FailoverSender(StockStompClient([(VIP, 61613)]), QUEUE, "vip")
            sampler.start()
            for index in range(args.kills):
                master = bench.settled()
                sender.resume()
                sender.wait_receipts(10)
                time.sleep(random.uniform(0, 0.02))
                generation = sender.generation
                killed_at = bench.kill(master)
                sender.first_receipt_after(killed_at, generation, 60)
                sender.wait_receipts(3)
                sender.pause()
                after = [t for t, g, _ in sender.records if t >= killed_at and g > generation]
                firsts.append(after[0] - killed_at)
                thirds.append(after[2] - killed_at)
                print(
                    f"  kill {index + 1}: first {firsts[-1] * 1000:.0f} ms, "
                    f"third {thirds[-1] * 1000:.0f} ms",
                    flush=True,
                )
                bench.start_node(master)
            receipted = sender.receipted_ids()
            sender.close()
            sender = None
            delivered = drain((VIP, 61613), QUEUE, idle_s=2.0, limit_s=120)
            lost = len(set(receipted) - set(delivered))
        finally:
            stop.set()
            if sender is not None:
                sender.close()
            bench.close()
            remove_network()
    print()
    print(
        f"| keepalived, the guide's example | {statistics.median(firsts) * 1000:.0f} / "
        f"{max(firsts) * 1000:.0f} | {statistics.median(thirds) * 1000:.0f} / "
        f"{max(thirds) * 1000:.0f} | address held twice: {twice[0]} of {twice[1]} samples "
        f"| {lost} of {len(receipted)} |"
    )


if __name__ == "__main__":
    main()
