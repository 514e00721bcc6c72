"""A real HAProxy before the STOMP ports, health-checking /master: clients follow the master."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.consumer import Consumer
from client.producer import Producer
from supervisor.localgroup import free_port, http_status
from tests.harness.group import Group, wait_until

pytestmark = pytest.mark.slow
HAPROXY = shutil.which("haproxy")
QUEUE = "/queue/through-haproxy"


def haproxy_config(front_port: int, backends: dict[str, tuple[int, int]], stats_port: int) -> str:
    """TCP mode, httpchk on each node's /master, the operator guide's settings."""
    servers = "\n".join(
        f"    server {name} 127.0.0.1:{stomp} check port {http} inter 100ms fall 1 rise 2"
        for name, (stomp, http) in backends.items()
    )
    return f"""
global
    maxconn 256

defaults
    mode tcp
    timeout connect 1s
    timeout client 30s
    timeout server 30s

frontend stomp
    bind 127.0.0.1:{front_port}
    default_backend primacy_stomp

backend primacy_stomp
    option httpchk GET /master
    http-check expect status 200
    default-server on-marked-down shutdown-sessions
{servers}

frontend stats
    mode http
    bind 127.0.0.1:{stats_port}
    http-request return status 200 if {{ nbsrv(primacy_stomp) ge 1 }}
    http-request return status 503
"""


@pytest.fixture
def haproxy(tmp_path: Path) -> Iterator[tuple[Path, int, int]]:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    yield tmp_path / "haproxy.cfg", free_port(), free_port()


def test_a_client_through_haproxy_keeps_working_across_a_master_kill(
    group: Group, haproxy: tuple[Path, int, int]
) -> None:
    config_path, front_port, stats_port = haproxy
    stomp_ports = {f"n{i}": free_port() for i in (1, 2, 3)}
    for node_id, port in stomp_ports.items():
        group.start(node_id, "--stomp", f"127.0.0.1:{port}")
    master = group.wait_for_master(timeout_s=30)
    backends = {n: (stomp_ports[n], group.nodes[n].port) for n in stomp_ports}
    config_path.write_text(haproxy_config(front_port, backends, stats_port))
    assert HAPROXY is not None
    proxy = subprocess.Popen(
        [HAPROXY, "-db", "-f", str(config_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: http_status(stats_port, "/") == 200, 15, "HAProxy to see the master")
        url = f"tcp://127.0.0.1:{front_port}"
        producer = Producer(url, window=1, receipt_timeout_s=3.0)
        sent = [producer.send(QUEUE, f"before {n}".encode()) for n in range(20)]
        master.signal(signal.SIGKILL)
        master.process.wait(10)
        sent += [producer.send(QUEUE, f"after {n}".encode()) for n in range(20)]
        producer.flush()
        assert producer.failover.reconnects >= 1  # the client did lose its connection
        producer.close()

        consumer = Consumer(url, QUEUE, receipt_timeout_s=3.0)
        seen: set[str] = set()
        deadline = time.monotonic() + 30
        while not set(sent) <= seen and time.monotonic() < deadline:
            message = consumer.receive(0.5)
            if message is not None:
                seen.add(message.message_id)
                consumer.ack(message)
        consumer.close()
        assert set(sent) <= seen
    finally:
        proxy.send_signal(signal.SIGTERM)
        try:
            proxy.wait(10)
        except subprocess.TimeoutExpired:
            proxy.kill()
            proxy.wait(10)
