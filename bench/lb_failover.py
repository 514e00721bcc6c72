"""kill -9 of the master -> first and third RECEIPT through HAProxy (issue 46), beside the same
figure straight to the nodes with a failover URL.

Two built-in-broker nodes on one local share. A stock stomp.py producer
(``bench/activemq/workload.py``'s ``StockStompClient``: its defaults and the loop a user
writes around it) sends receipted messages one at a time, either to HAProxy's one address
or to both nodes (stomp.py's own failover over a host list, the "failover URL"). Each kill
-9 lands at a random point of the send/receipt cycle; the killed node is restarted as a
slave before the next. Per setup:

- ``direct``: no HAProxy, the producer given both nodes;
- ``guide-before``: the guide's HAProxy example as issue 46 found it (``timeout connect 2s``,
  ``inter 500ms fall 1 rise 2``, no redispatch, no push);
- ``guide-checks``: today's guide example, its HAProxy means only (nodes not pushing);
- ``guide-push``: today's guide example with the nodes pushing to its runtime API;
- ``amq-direct``, ``amq-checks``, ``amq-push`` (not run unless named): ActiveMQ under
  primacy with a warm standby (the operator guide's recipe, bench/activemq/under_primacy.py)
  behind the guide's HAProxy example: the client straight to both brokers, through HAProxy
  with its checks alone, through HAProxy with the push.

Through HAProxy its runtime state is sampled every 10 ms for two servers ready at once;
at the end the queue is drained and every receipted message looked for. ``--load N`` runs N
busy processes beside it (a loaded host).

    python bench/lb_failover.py --kills 10
    python bench/lb_failover.py --kills 5 --load 4 --setups guide-push
    python bench/lb_failover.py --kills 5 --setups amq-direct,amq-push
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import random
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.activemq.workload import FailoverSender, StockStompClient, drain
from primacy.cli.localgroup import Group, NodeProcess, free_port, wait_until
from primacy.supervisor.shell.haproxy_api import RuntimeApi, is_ready
from tests.harness.guide_examples import guide_example, haproxy_config
from tests.harness.haproxy import HAPROXY, Haproxy

NODES = ("node-a", "node-b")
BACKEND = "primacy_stomp"
QUEUE = "/queue/lb-failover"
SETUPS = ("direct", "guide-before", "guide-checks", "guide-push")
AMQ_SETUPS = ("amq-direct", "amq-checks", "amq-push")
# The guide's example as issue 46 measured it (docs/operator-guide.md before 46).
GUIDE_BEFORE = {
    "timeout connect": "timeout connect 2s",
    "timeout check": "",
    "retries": "",
    "option redispatch": "",
    "default-server": "default-server inter 500ms fall 1 rise 2 on-marked-down shutdown-sessions",
}
REPLACE: dict[str, str] = {}  # --replace: settings measured against the guide's
RECEIPTS_BEFORE_KILL = 10
RECEIPTS_AFTER = 3


def busy() -> None:
    while True:
        pass


class TwoReadySampler:
    """HAProxy's ``show servers state`` every 10 ms: how often more than one server was ready."""

    def __init__(self, ready: Callable[[], set[str]]) -> None:
        self.ready, self.samples, self.two_ready = ready, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            try:
                ready = self.ready()
            except Exception:
                continue
            self.samples += 1
            self.two_ready += len(ready) > 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


class Setup:
    """One group of two nodes, with or without HAProxy in front, for one setup."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        root.mkdir()
        (root / "share").mkdir()
        self.group = Group(share=root / "share", log_dir=root)
        self.ports = {node_id: (free_port(), free_port()) for node_id in NODES}
        self.proxy: Haproxy | None = None
        self.front = free_port()
        if name != "direct":
            replace = dict(GUIDE_BEFORE) if name == "guide-before" else dict(REPLACE)
            config = haproxy_config(self.front, self.ports, free_port(), replace=replace)
            self.proxy = Haproxy(root, config)
        for node_id in NODES:
            self.start_node(node_id)

    def start_node(self, node_id: str) -> NodeProcess:
        stomp_port, http_port = self.ports[node_id]
        push = []
        if self.name == "guide-push":
            assert self.proxy is not None
            push = ["--haproxy-runtime-api", self.proxy.tcp_address]
        return self.group.start(
            node_id, "--stomp", f"127.0.0.1:{stomp_port}", *push, http_port=http_port
        )

    def ready(self) -> Callable[[], set[str]] | None:
        proxy = self.proxy
        return None if proxy is None else lambda: proxy.ready(BACKEND)

    def kill(self, master: NodeProcess) -> float:
        killed_at = time.monotonic()
        master.signal(signal.SIGKILL)
        return killed_at

    def restore(self, master: NodeProcess) -> None:
        self.start_node(master.node_id)

    def addresses(self) -> list[tuple[str, int]]:
        if self.proxy is None:
            return [("127.0.0.1", stomp) for stomp, _ in self.ports.values()]
        return [("127.0.0.1", self.front)]

    def settled(self) -> NodeProcess:
        """Both nodes up, one master, HAProxy sending to it alone."""
        wait_until(lambda: len(self.group.alive()) == 2, 30, "two nodes")
        master = self.group.wait_for_master(timeout_s=30)
        other = next(n for n in self.group.alive() if n is not master)
        wait_until(lambda: other.status("/slave") == 200, 30, "the other node a slave")
        if self.proxy is not None:
            proxy = self.proxy
            wait_until(lambda: proxy.ready(BACKEND) == {master.node_id}, 30, "HAProxy settled")
        return master

    def master_address(self) -> tuple[str, int]:
        master = self.group.wait_for_master(timeout_s=30)
        return ("127.0.0.1", self.ports[master.node_id][0])

    def close(self) -> None:
        self.group.close()
        if self.proxy is not None:
            self.proxy.stop()


class ActiveMQSetup:
    """ActiveMQ under primacy with a warm standby (bench/activemq/under_primacy.py), the
    guide's HAProxy in front; the client goes through it or straight to both brokers."""

    def __init__(self, name: str, root: Path) -> None:
        from bench.activemq.under_primacy import ActiveMQUnderPrimacy

        self.name = name
        self.api = RuntimeApi(f"127.0.0.1:{free_port()}")
        api_port = int(self.api.address.rpartition(":")[2])
        push = ("--haproxy-runtime-api", self.api.address) if name == "amq-push" else ()
        root.mkdir()
        self.group = ActiveMQUnderPrimacy(
            root, 256, *push, warm=True, haproxy_runtime_api_port=api_port
        )
        self.group.start()

    def ready(self) -> Callable[[], set[str]] | None:
        if self.name == "amq-direct":
            return None
        api = self.api
        return lambda: {n for n, state in api.servers(BACKEND, 2.0).items() if is_ready(*state)}

    def settled(self) -> NodeProcess:
        master = self.group.wait_for_a_master()
        others = [n for n in self.group.group.alive() if n is not master]
        wait_until(lambda: all(n.status("/slave") == 200 for n in others), 120, "a standby")
        ready = self.ready()
        if ready is not None:
            wait_until(lambda: ready() == {master.node_id}, 60, "HAProxy settled")
        return master

    def kill(self, master: NodeProcess) -> float:
        return self.group.kill_master()

    def restore(self, master: NodeProcess) -> None:
        self.group.restore()

    def addresses(self) -> list[tuple[str, int]]:
        if self.name == "amq-direct":
            return [("127.0.0.1", port) for port in self.group.stomp_ports.values()]
        return [("127.0.0.1", self.group.front_port)]

    def master_address(self) -> tuple[str, int]:
        master = self.group.wait_for_a_master()
        return ("127.0.0.1", self.group.stomp_ports[master.node_id])

    def close(self) -> None:
        self.group.close()


def nth_receipt_after(sender: FailoverSender, killed_at: float, generation: int, n: int) -> float:
    after = [at for at, gen, _ in sender.records if at >= killed_at and gen > generation]
    return after[n - 1] - killed_at


def run_setup(name: str, root: Path, kills: int) -> dict[str, object]:
    setup: Setup | ActiveMQSetup = (
        ActiveMQSetup(name, root) if name.startswith("amq-") else Setup(name, root)
    )
    sampler = None
    sender = None
    firsts: list[float] = []
    thirds: list[float] = []
    try:
        setup.settled()
        sender = FailoverSender(StockStompClient(setup.addresses()), QUEUE, name)
        ready = setup.ready()
        if ready is not None:
            sampler = TwoReadySampler(ready)
        for index in range(kills):
            master = setup.settled()
            sender.resume()
            sender.wait_receipts(RECEIPTS_BEFORE_KILL)
            time.sleep(random.uniform(0, 0.02))
            generation = sender.generation
            killed_at = setup.kill(master)
            sender.first_receipt_after(killed_at, generation, 60)
            sender.wait_receipts(RECEIPTS_AFTER)
            sender.pause()
            firsts.append(nth_receipt_after(sender, killed_at, generation, 1))
            thirds.append(nth_receipt_after(sender, killed_at, generation, RECEIPTS_AFTER))
            print(
                f"  {name} kill {index + 1}: first {firsts[-1] * 1000:.0f} ms, "
                f"third {thirds[-1] * 1000:.0f} ms",
                flush=True,
            )
            setup.restore(master)
        reconnects = sender.generation - 1
        receipted = sender.receipted_ids()
        sender.close()
        sender = None
        delivered = drain(setup.master_address, QUEUE, idle_s=2.0, limit_s=120)
        lost = len(set(receipted) - set(delivered))
        return {
            "firsts": firsts,
            "thirds": thirds,
            "lost": lost,
            "receipted": len(receipted),
            "extra_reconnects": reconnects - kills,
            "samples": sampler.samples if sampler else None,
            "two_ready": sampler.two_ready if sampler else None,
        }
    finally:
        if sampler is not None:
            sampler.stop()
        if sender is not None:
            sender.close()
        setup.close()


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} / {max(values) * 1000:.0f}" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=10, help="kills per setup")
    parser.add_argument(
        "--setups",
        default=",".join(SETUPS),
        help=f"comma-separated, of {', '.join(SETUPS + AMQ_SETUPS)}",
    )
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the run")
    parser.add_argument(
        "--replace",
        action="append",
        default=[],
        metavar="SETTING=LINE",
        help="change one line of the guide's HAProxy example for every HAProxy setup but "
        "guide-before (for example 'default-server=default-server inter 200ms rise 1')",
    )
    args = parser.parse_args()
    logging.getLogger("stomp.py").setLevel(logging.CRITICAL)  # its tracebacks on every kill
    for item in args.replace:
        setting, _, line = item.partition("=")
        REPLACE[setting] = line
    if HAPROXY is None:
        sys.exit("needs haproxy (apt-get install haproxy)")
    setups = [s.strip() for s in args.setups.split(",")]
    assert all(s in SETUPS + AMQ_SETUPS for s in setups), setups
    (line,) = re.findall(r"^\s*(default-server .*)$", guide_example("Load balancer: HAProxy"), re.M)
    print(f"the guide's example: {line}; changed: {REPLACE or 'nothing'}", flush=True)
    burners = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for burner in burners:
        burner.start()
    results = {}
    try:
        with tempfile.TemporaryDirectory(prefix="primacy-bench-lb-") as workdir:
            for name in setups:
                print(f"{name}: {args.kills} kills", flush=True)
                results[name] = run_setup(name, Path(workdir) / name, args.kills)
    finally:
        for burner in burners:
            burner.kill()
            burner.join(10)
    print()
    print(
        f"kill -9 -> RECEIPT, stock stomp.py, 2 nodes (amq-*: ActiveMQ under primacy, warm; "
        f"else the built-in broker), {args.kills} kills per "
        f"setup, {args.load} busy processes beside"
    )
    print()
    print(
        "| setup | first RECEIPT median / worst (ms) | third RECEIPT median / worst (ms) "
        "| extra reconnects | two ready (samples) | receipted lost |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    direct = results.get("direct")
    for name, result in results.items():
        firsts, thirds = result["firsts"], result["thirds"]
        assert isinstance(firsts, list) and isinstance(thirds, list)
        ratio = ""
        if direct is not None and name != "direct":
            base = statistics.median(direct["thirds"])  # type: ignore[arg-type]
            ratio = f" (x{statistics.median(thirds) / base:.1f} of direct)"
        two = "-" if result["samples"] is None else f"{result['two_ready']} ({result['samples']})"
        print(
            f"| {name} | {ms(firsts)} | {ms(thirds)}{ratio} | {result['extra_reconnects']} "
            f"| {two} | {result['lost']} of {result['receipted']} |"
        )


if __name__ == "__main__":
    main()
