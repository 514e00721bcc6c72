"""Failover with authentication and TLS switched on: two real nodes serving STOMP over TLS
with a users file, the project's client and ``primacy send|consume|status`` on ``ssl://``
addresses, SIGKILLs of the master; every acknowledged message is consumed, once."""

from __future__ import annotations

import signal
import socket
import ssl
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from primacy.client.consumer import Consumer
from primacy.client.producer import Producer
from tests.harness.cli import primacy
from tests.harness.group import Group, NodeProcess, free_port, wait_until
from tests.harness.tls_certs import make_pki

pytestmark = pytest.mark.slow

PASSCODE = "app password"


def test_every_acknowledged_message_survives_sigkills_over_tls_with_logins(
    group: Group, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path / "pki")
    users = tmp_path / "users.json"
    assert primacy("users", "add", str(users), "app", stdin=PASSCODE + "\n").returncode == 0
    ports = {"a": free_port(), "b": free_port()}
    secure = [
        "--stomp-users", str(users),
        "--stomp-tls-cert", str(pki.cert), "--stomp-tls-key", str(pki.key),
        "--http-tls-cert", str(pki.cert), "--http-tls-key", str(pki.key),
    ]  # fmt: skip

    def start(name: str) -> NodeProcess:
        return group.start(name, "--stomp", f"127.0.0.1:{ports[name]}", *secure)

    trust = ssl.create_default_context(cafile=str(pki.ca))

    def is_master(node: NodeProcess) -> bool:
        try:
            url = f"https://127.0.0.1:{node.port}/master"
            return httpx.get(url, verify=trust, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    nodes = {name: start(name) for name in ports}
    wait_until(lambda: any(is_master(n) for n in nodes.values()), 30, "a master over https")
    url = (
        "failover:("
        + ",".join(f"ssl://127.0.0.1:{p}" for p in ports.values())
        + ")?initialReconnectDelay=20&maxReconnectDelay=500&randomize=false&timeout=60000"
    )
    security = {"login": "app", "passcode": PASSCODE, "tls_ca_file": pki.ca}
    producer = Producer(url, **security)
    acknowledged = []
    try:
        for round_ in range(2):
            acknowledged += [
                producer.send("/queue/q", f"r{round_}-{n}".encode()) for n in range(10)
            ]
            master = next(n for n in nodes.values() if is_master(n))
            master.signal(signal.SIGKILL)
            master.process.wait(30)
            nodes[master.node_id] = start(master.node_id)
            wait_until(lambda: any(is_master(n) for n in nodes.values()), 60, "a new master")
        acknowledged += [producer.send("/queue/q", b"after")]
    finally:
        producer.close()
    master = next(n for n in nodes.values() if is_master(n))
    with socket.create_connection(("127.0.0.1", ports[master.node_id]), timeout=10) as plain:
        plain.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")  # no TLS: dropped
        assert b"CONNECTED" not in plain.recv(4096)

    def handshakes_failed() -> float:
        metrics = httpx.get(f"https://127.0.0.1:{master.port}/metrics", verify=trust, timeout=5)
        for family in text_string_to_metric_families(metrics.text):
            for sample in family.samples:
                if sample.name == "primacy_tls_handshakes_failed_total":
                    return float(sample.value)
        return -1.0

    wait_until(lambda: handshakes_failed() == 1, 10, "the dropped handshake in /metrics")
    status = primacy("status", "--url", f"https://127.0.0.1:{master.port}", "--ca-file",
                      str(pki.ca), "--json")  # fmt: skip
    assert status.returncode == 0 and '"stomp_auth": "users-file"' in status.stdout, status.stderr
    sent = primacy(
        "send", url, "/queue/q", "--count", "3", "--login", "app", "--ca-file", str(pki.ca),
        env={"PRIMACY_STOMP_PASSCODE": PASSCODE},
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    consumer = Consumer(url, "/queue/q", **security)
    received = []
    while (message := consumer.receive(timeout_s=3.0)) is not None:
        received.append(message.message_id)
        assert consumer.ack(message)
    consumer.close()
    assert sorted(set(acknowledged) - set(received)) == []
    assert len(received) == len(set(received)) == len(acknowledged) + 3
