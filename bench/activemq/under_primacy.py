"""ActiveMQ under primacy: two primacy nodes, each supervising an ActiveMQ 5.17 (exec mode)
on one shared KahaDB directory, behind HAProxy checking each node's ``/master``.

The recipe of docs/operator-guide.md, "Supervising your own broker", on loopback
ports: used by ``bench/compare_activemq.py`` (its third group) and by
``tests/integration/test_activemq_under_primacy.py``.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import psutil

from bench.activemq.brokers import Address, PrimacyGroup
from bench.activemq.config import (
    LockerTiming,
    compile_gate_locker,
    java_command,
    write_instance,
)
from bench.activemq.figures import AMQ_UNDER_PRIMACY, AMQ_UNDER_PRIMACY_WARM
from primacy.cli.localgroup import NodeProcess, free_port, http_status, wait_until
from primacy.supervisor import codes
from tests.harness.guide_examples import haproxy_config

HAPROXY = shutil.which("haproxy")
NODES = ("node-a", "node-b")
# ActiveMQ's own shared-file locker stays on as a backstop; with primacy it never contends.
BACKSTOP = LockerTiming("backstop", 1000, 0)
# A JVM broker needs seconds to start and to shut down cleanly.
READY_TIMEOUT_S = 120
STOP_GRACE_MS = 15_000
# A guardian's kill of a broker whose node confirmed its claim late (not one of a dead node).
CLAIM_LAPSE_KILL = re.compile(
    re.escape(codes.CHILD_CLAIM_LAPSED) + r" guardian \d+: the claim lapsed unconfirmed: killing"
)


class ActiveMQUnderPrimacy(PrimacyGroup):
    """The two nodes and HAProxy; clients connect to HAProxy's one address.

    A node's pid is its supervisor's: its process tree holds the JVM, and killing the
    master's supervisor (``kill_master``) leaves its guardian to kill the JVM."""

    label = AMQ_UNDER_PRIMACY

    def __init__(
        self,
        root: Path,
        heap_mb: int = 256,
        *extra: str,
        shares: dict[str, Path] | None = None,
        warm: bool = False,
        openwire: bool = False,
        haproxy_checks: str | None = None,
        haproxy_connect_timeout: str | None = None,
        haproxy_check_timeout: str | None = None,
        haproxy_runtime_api_port: int | None = None,
        exec_wrapper: tuple[str, ...] = (),
        jvm_options: tuple[str, ...] = (),
    ) -> None:
        """``extra``: more ``primacy run`` flags for both nodes (a keepalive, say). ``shares``:
        each node's own path to the share (emulated hosts' mounts of one directory, say);
        by default both use one local directory. ``warm``: a warm standby on every node,
        KahaDB's locker being primacy's gate (``PrimacyGateLocker``). ``openwire``: each broker
        also listens for ActiveMQ's JMS client (``openwire_ports``), not through HAProxy.
        ``haproxy_checks``: HAProxy's whole ``default-server`` line instead of the guide's, and
        ``haproxy_connect_timeout`` instead of its ``timeout connect`` (HAProxy waits
        the shorter of it and 1 s before it retries a refused connection), to measure what they
        cost a failover. ``haproxy_runtime_api_port``: HAProxy's runtime API there (for a
        node's push, given in ``extra``, and for sampling its state). ``exec_wrapper``: a
        command the JVM's command line is appended to (a shell that forks it rather than exec
        it, say). ``jvm_options``: for the brokers' JVMs
        (the tests' short-lived settings; the benchmarks run ActiveMQ as its users do)."""
        super().__init__(root, NODES, extra)
        self.shares = shares or {node_id: self.group.share for node_id in NODES}
        self.http_ports = {node_id: free_port() for node_id in NODES}  # kept across restarts
        self.bases = {node_id: root / f"activemq-{node_id}" for node_id in NODES}
        self.front_port, self.stats_port = free_port(), free_port()
        self._root, self._heap_mb = root, heap_mb
        self.warm = warm
        self._haproxy_checks = haproxy_checks
        self._haproxy_connect_timeout = haproxy_connect_timeout
        self._haproxy_check_timeout = haproxy_check_timeout
        self.haproxy_runtime_api_port = haproxy_runtime_api_port
        self._exec_wrapper = exec_wrapper
        self._jvm_options = jvm_options
        self.openwire_ports = {node_id: free_port() for node_id in NODES} if openwire else {}
        # What kill_master kills: the master's supervisor, its guardian, or its broker JVM.
        self.victim = "supervisor"
        if warm:
            self.label = AMQ_UNDER_PRIMACY_WARM
        self._proxy: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if HAPROXY is None:
            raise RuntimeError("haproxy is not installed (apt-get install haproxy)")
        for node_id in NODES:
            self.start_node(node_id)
        config = self._root / "haproxy.cfg"
        backends = {n: (self.stomp_ports[n], self.http_ports[n]) for n in NODES}
        replace = {}
        if self._haproxy_checks is not None:
            replace["default-server"] = f"default-server {self._haproxy_checks}"
        if self._haproxy_connect_timeout is not None:
            replace["timeout connect"] = f"timeout connect {self._haproxy_connect_timeout}"
        if self._haproxy_check_timeout is not None:  # the warm recipe's (issue 47)
            replace["timeout check"] = f"timeout check {self._haproxy_check_timeout}"
        text = haproxy_config(
            self.front_port,
            backends,
            self.stats_port,
            runtime_api_port=self.haproxy_runtime_api_port,
            replace=replace,
        )
        config.write_text(text)
        self._proxy = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_complete()

    def start_node(self, node_id: str) -> NodeProcess:
        conf = write_instance(
            self.bases[node_id],
            broker_name=node_id.replace("-", ""),
            stomp_port=self.stomp_ports[node_id],
            kahadb_dir=self.shares[node_id] / "activemq" / "kahadb",
            timing=BACKSTOP,
            gated=self.warm,
            openwire_port=self.openwire_ports.get(node_id),
        )
        classpath = compile_gate_locker(self._root / "gate-locker") if self.warm else None
        command = java_command(
            base=self.bases[node_id],
            conf_file=conf,
            heap_mb=self._heap_mb,
            classpath=classpath,
            jvm_options=self._jvm_options,
        )
        return self.group.start(
            node_id,
            # A warm node hands a crashed broker's role to the loaded standby rather than
            # start a cold JVM itself (docs/operator-guide.md, "A warm standby behind a gate").
            *(["--exec-warm-standby", "--exec-max-restarts", "0"] if self.warm else []),
            "--exec-ready",
            f"tcp:127.0.0.1:{self.stomp_ports[node_id]}",
            "--exec-ready-timeout-s",
            str(READY_TIMEOUT_S),
            "--exec-stop-grace-ms",
            str(STOP_GRACE_MS),
            exec_command=[*self._exec_wrapper, *command],
            http_port=self.http_ports[node_id],
            share=self.shares[node_id],
        )

    def kill_master(self) -> float:
        if self.victim == "supervisor":
            return super().kill_master()
        master = self.wait_for_a_master()
        below = psutil.Process(master.pid).children(recursive=True)
        if self.victim == "guardian":
            [victim] = [p for p in below if "primacy.supervisor.child.guardian" in p.cmdline()]
        else:
            [victim] = [p for p in below if p.name() == "java"]
        killed_at = time.monotonic()
        victim.send_signal(signal.SIGKILL)
        return killed_at

    def claim_lapse_kills(self) -> int:
        """The guardians' kills of a broker whose node confirmed its claim late, so far."""
        return sum(len(CLAIM_LAPSE_KILL.findall(n.log())) for n in self.group.every_process)

    def wait_while_a_node_holds_off(self) -> float:
        """Wait until no node of the group holds off (``held_off_s`` on ``/status``: a node
        that gave the lock up for its broker's exits takes none for ``crash_loop_hold_off_ms``
        from its last counted exit); returns how long that took, in seconds."""
        started = time.monotonic()

        def none_held_off() -> bool:
            for node in self.group.alive():
                try:
                    status = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=2).json()
                except (httpx.HTTPError, ValueError):
                    return False
                if float(status.get("held_off_s") or 0.0) > 0:
                    return False
            return True

        wait_until(none_held_off, 120, "no node of the group to hold off", interval_s=0.1)
        return time.monotonic() - started

    def _wait_complete(self) -> None:
        """A master that HAProxy sees, and the other node standing by."""
        master = self.wait_for_a_master()
        wait_until(
            lambda: all(n.status("/slave") == 200 for n in self.group.alive() if n is not master),
            60,
            "the other node to stand by",
        )

    def wait_for_a_master(self, timeout_s: float = READY_TIMEOUT_S) -> NodeProcess:
        """The serving node, once HAProxy sees it too."""
        master = self.group.wait_for_master(timeout_s=timeout_s)
        wait_until(
            lambda: http_status(self.stats_port, "/") == 200, timeout_s, "HAProxy to see a master"
        )
        return master

    def stomp_addresses(self) -> list[Address]:
        return [("127.0.0.1", self.front_port)]

    def master_address(self) -> Address:
        self.wait_for_a_master()
        return ("127.0.0.1", self.front_port)

    def close(self) -> None:
        if self._proxy is not None and self._proxy.poll() is None:
            self._proxy.kill()
            self._proxy.wait(10)
        super().close()  # SIGKILL by pid; every guardian then kills its JVM
