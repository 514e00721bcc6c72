"""Debian's ActiveMQ under primacy: two nodes each supervising a real ActiveMQ 5.17 on one
shared KahaDB directory, HAProxy in front checking /master, stock stomp.py clients through
HAProxy. The master's supervisor is SIGKILLed, then the next one is SIGSTOPped: no two
ActiveMQ processes ever run at once (their processes and listening ports are sampled
throughout), and every message ActiveMQ receipted is consumed at the end.

The share cut with the fault harness is covered with a plain child
(tests/fault/test_hung_share_connections.py); the recipe is docs/operator-guide.md,
"Supervising your own broker".
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import stomp.exception

from bench.activemq.config import missing_activemq
from bench.activemq.under_primacy import HAPROXY, ActiveMQUnderPrimacy
from primacy.cli.localgroup import http_status
from tests.broker.stomppy import StompPy
from tests.harness.group import wait_until

pytestmark = pytest.mark.slow

QUEUE = "/queue/under-primacy"


class BrokerWatch:
    """Samples, every few milliseconds, which of our ActiveMQ JVMs run and which listen."""

    def __init__(self, bases: dict[str, Path], ports: dict[str, int]) -> None:
        self._bases, self._ports = bases, ports
        self.overlaps: list[tuple[str, ...]] = []  # samples with more than one JVM alive
        self.listening_overlaps: list[tuple[str, ...]] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BrokerWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def running(self) -> dict[str, psutil.Process]:
        """Our JVMs by node (the supervisors' and guardians' command lines name them too)."""
        found: dict[str, psutil.Process] = {}
        for proc in psutil.process_iter(["name", "cmdline", "status"]):
            if proc.info["name"] != "java" or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            command = " ".join(proc.info["cmdline"] or ())
            for node_id, base in self._bases.items():
                if f"-Dactivemq.base={base}" in command:
                    found[node_id] = proc
        return found

    def _listening(self, node_id: str, proc: psutil.Process) -> bool:
        try:
            return any(
                c.status == psutil.CONN_LISTEN and c.laddr.port == self._ports[node_id]
                for c in proc.net_connections(kind="tcp")
            )
        except psutil.Error:
            return False

    def _run(self) -> None:
        while not self._stop.is_set():
            running = self.running()
            self.samples += 1
            if len(running) > 1:
                self.overlaps.append(tuple(sorted(running)))
            listening = [n for n, p in running.items() if self._listening(n, p)]
            if len(listening) > 1:
                self.listening_overlaps.append(tuple(sorted(listening)))
            time.sleep(0.01)


def _connect(amq: ActiveMQUnderPrimacy) -> StompPy:
    """A stomp.py connection through HAProxy once it sees a master; retried across failover."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        wait_until(lambda: http_status(amq.stats_port, "/") == 200, 120, "HAProxy: a master")
        try:
            return StompPy(amq.stomp_addresses()[0])
        except (stomp.exception.ConnectFailedException, OSError):
            time.sleep(0.2)
    raise AssertionError("no STOMP connection through HAProxy within 120 s")


def _send(amq: ActiveMQUnderPrimacy, bodies: list[str]) -> list[str]:
    """Send each body with a receipt; the bodies ActiveMQ receipted."""
    client = _connect(amq)
    receipted = [body for body in bodies if client.send(QUEUE, body, persistent="true")]
    client.close()
    return receipted


@pytest.fixture
def amq(tmp_path: Path) -> Iterator[ActiveMQUnderPrimacy]:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    reason = missing_activemq()
    if reason is not None:
        pytest.skip(f"{reason} (bash .ci/setup dev installs it as root)")
    group = ActiveMQUnderPrimacy(tmp_path, 256, "--lock-keep-alive-period-ms", "500")
    try:
        yield group
    finally:
        group.close()


def test_activemq_under_primacy_never_runs_twice_and_keeps_what_it_receipted(
    amq: ActiveMQUnderPrimacy,
) -> None:
    with BrokerWatch(amq.bases, amq.stomp_ports) as watch:
        amq.start()
        first = amq.wait_for_a_master()
        second = amq.group.nodes[next(n for n in amq.stomp_ports if n != first.node_id)]
        receipted = _send(amq, [f"before kill {n}" for n in range(20)])

        # 1. SIGKILL of the master's supervisor: its ActiveMQ dies with it, the other node's
        #    starts, clients follow through HAProxy.
        first.signal(signal.SIGKILL)
        first.process.wait(10)
        wait_until(second.is_master, 120, "the other node to serve")
        receipted += _send(amq, [f"after kill {n}" for n in range(20)])

        # 2. SIGSTOP of the new master's supervisor: it cannot confirm its claim, so its
        #    ActiveMQ is killed within a keepalive. It still holds the lock (a local share),
        #    so the group has no master until it is killed for good.
        restarted = amq.start_node(first.node_id)
        wait_until(lambda: restarted.status("/slave") == 200, 60, "a standby")
        second.signal(signal.SIGSTOP)
        wait_until(lambda: second.node_id not in watch.running(), 10, "the stopped JVM to die")
        assert restarted.status("/master") == 503
        second.signal(signal.SIGKILL)
        second.signal(signal.SIGCONT)
        wait_until(restarted.is_master, 120, "the standby to serve")
        receipted += _send(amq, [f"after stop {n}" for n in range(20)])

        consumer = _connect(amq)
        consumer.subscribe(QUEUE, "all", ack="auto")
        consumed: set[str] = set()
        deadline = time.monotonic() + 60
        while not set(receipted) <= consumed and time.monotonic() < deadline:
            try:
                consumed.add(str(consumer.message(timeout_s=1).body))
            except queue.Empty:  # more may still come
                pass
        consumer.close()
    assert watch.samples > 100
    assert watch.overlaps == [], f"two ActiveMQ JVMs ran at once: {watch.overlaps[:5]}"
    assert watch.listening_overlaps == []
    assert len(receipted) == 60, f"ActiveMQ receipted {len(receipted)} of 60"
    assert set(receipted) <= consumed, sorted(set(receipted) - consumed)[:10]
    assert "PRIMACY-1106" in second.log()  # its guardian killed it, not the test
