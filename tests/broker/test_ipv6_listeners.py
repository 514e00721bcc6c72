"""IPv6 on every listener (issue 48): STOMP on ``[::1]`` and on the wildcard ``[::]`` (which
takes IPv4 too), STOMP over TLS on ``[::1]``, and a real node whose HTTP and STOMP listen on
``::1`` only. Before, ``--stomp [::1]:P`` failed with "Address family for hostname not
supported" and the node claimed a new epoch at every hold-off, never serving.

Skipped, with the reason, only where the host has no IPv6 loopback to bind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.broker.config import BrokerConfig
from primacy.client.producer import Producer
from tests.broker.nodes import Masters, stored_state
from tests.broker.stomppy import StompPy
from tests.harness.group import free_port, http_status, wait_until
from tests.harness.tls_certs import issue, make_pki


def _no_ipv6_loopback() -> str | None:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError as error:
        return f"this host cannot bind the IPv6 loopback ::1: {error}"
    return None


pytestmark = pytest.mark.skipif(_no_ipv6_loopback() is not None, reason=str(_no_ipv6_loopback()))


def _round_trip(address: tuple[str, int], destination: str, **tls: str) -> str:
    client = StompPy(address, tls=tls or None)
    try:
        assert client.send(destination, f"over {address[0]}")
        client.subscribe(destination, "s")
        return str(client.message().body)
    finally:
        client.close()


def test_stomp_listens_on_the_ipv6_loopback(masters: Masters) -> None:
    master = masters.start(host="::1")
    host, port = master.address
    assert host == "::1"
    assert _round_trip(("::1", port), "/queue/six") == "over ::1"


def test_our_failover_client_reaches_a_master_on_ipv6(masters: Masters) -> None:
    port = masters.start(host="::1").address[1]
    producer = Producer(f"failover:(tcp://[::1]:{port})?initialReconnectDelay=10")
    try:
        message_id = producer.send("/queue/ours6", b"over [::1]")
    finally:
        producer.close()
    assert list(stored_state(masters.share).pending["/queue/ours6"]) == [message_id]


def test_the_ipv6_wildcard_serves_both_families(masters: Masters) -> None:
    port = masters.start(host="::").address[1]
    assert _round_trip(("::1", port), "/queue/both") == "over ::1"
    assert _round_trip(("127.0.0.1", port), "/queue/both") == "over 127.0.0.1"


def test_stomp_over_tls_listens_on_the_ipv6_loopback(masters: Masters, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    cert, key = issue(tmp_path / "pki", "server6", (pki.ca, pki.ca.with_suffix(".key")), "IP:::1")
    master = masters.start(BrokerConfig(stomp_tls_cert=cert, stomp_tls_key=key), host="::1")
    port = master.address[1]
    assert _round_trip(("::1", port), "/queue/tls6", ca_certs=str(pki.ca)) == "over ::1"
    assert master.service.stats()["tls"] is True


@pytest.fixture
def ipv6_node(tmp_path: Path) -> Iterator[tuple[int, int, subprocess.Popen[bytes]]]:
    """A real node whose HTTP endpoint and STOMP listener are on ``[::1]`` only."""
    share = tmp_path / "share"
    share.mkdir()
    http_port, stomp_port = free_port(), free_port()
    log = (tmp_path / "node.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "primacy.cli",
            "run",
            "--node-id",
            "six",
            "--share",
            str(share),
            "--http",
            f"[::1]:{http_port}",
            "--stomp",
            f"[::1]:{stomp_port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=os.environ.copy(),
    )
    try:
        yield http_port, stomp_port, process
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        log.close()


@pytest.mark.slow
def test_a_node_serves_http_and_stomp_on_ipv6_only(
    ipv6_node: tuple[int, int, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    http_port, stomp_port, process = ipv6_node
    wait_until(lambda: http_status(http_port, "/master", host="::1") == 200, 30, "master on [::1]")
    assert _round_trip(("::1", stomp_port), "/queue/node6") == "over ::1"
    # One epoch: the node bound at its first try, it did not step down and claim again.
    assert sorted(p.name for p in (tmp_path / "share" / "epochs").iterdir()) == ["1"]
    assert process.poll() is None
