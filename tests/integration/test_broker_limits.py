"""The STOMP connector's limits through ``primacy run`` flags, as a user meets them: stock
stomp.py clients get each limit's ERROR, the node keeps serving, and ``/metrics`` counts it."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from primacy.broker import codes
from tests.broker.nodes import RawClient
from tests.broker.stomppy import StompPy
from tests.harness.group import Group, NodeProcess, free_port, wait_until

pytestmark = pytest.mark.slow


def _metric(node: NodeProcess, name: str, labels: dict[str, str] | None = None) -> float:
    text = httpx.get(f"http://127.0.0.1:{node.port}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and (labels is None or sample.labels == labels):
                return float(sample.value)
    raise AssertionError(f"{name} {labels or ''} is not in /metrics")


def test_limits_set_by_flags_answer_with_their_errors_and_show_in_metrics(group: Group) -> None:
    port = free_port()
    node = group.start(
        "n1",
        "--stomp", f"127.0.0.1:{port}",
        "--max-connections", "3",
        "--max-connections-per-network", "3",  # every client is 127.0.0.1: one network
        "--max-destination-messages", "2",
        "--max-redeliveries", "1",
    )  # fmt: skip
    wait_until(node.is_master, 30, "n1 to serve")
    address = ("127.0.0.1", port)

    producer = StompPy(address)
    assert producer.send("/queue/orders", "one", **{"message-id": "o1"})
    assert producer.send("/queue/orders", "two", **{"message-id": "o2"})
    assert not producer.send("/queue/orders", "three", **{"if-full": "error"})
    assert producer.listener.errors[0].headers["message"].startswith(codes.DESTINATION_FULL)
    producer.close()

    consumer = StompPy(address)
    consumer.subscribe(
        "/queue/orders", "s", ack="client-individual", **{"activemq.prefetchSize": "1"}
    )
    for _delivery in range(2):  # delivered, then redelivered once (the limit): then to the DLQ
        message = consumer.message()
        assert message.headers["message-id"] == "o1"
        assert consumer.frame_with_receipt("nack", message.headers["ack"])
    assert consumer.message().headers["message-id"] == "o2"
    second, third = StompPy(address), StompPy(address)
    refused = RawClient(address)  # the fourth connection: over max_connections
    refused.send("CONNECT", {"accept-version": "1.2", "host": "x"})
    errors = [f for f in refused.read_until_closed() if f.command == "ERROR"]
    assert errors and errors[0].get("message", "").startswith(codes.CONNECTION_LIMIT)
    wait_until(lambda: _metric(node, "primacy_dead_lettered_total") == 1, 10, "the DLQ move")
    assert _metric(node, "primacy_limit_refusals_total", {"limit": "flow_control"}) == 1
    assert _metric(node, "primacy_limit_refusals_total", {"limit": "max_connections"}) >= 1
    assert _metric(node, "primacy_destinations") == 2  # orders and DLQ.orders
    second.subscribe("/queue/DLQ.orders", "d", ack="client-individual")
    dead = second.message()
    assert dead.headers["original-destination"] == "/queue/orders"
    for client in (consumer, second, third):
        client.close()
    assert node.is_master()


def test_bodies_nobody_consumes_do_not_grow_the_master_past_its_body_limit(group: Group) -> None:
    """Found by trying: 400 x 512 KiB SENDs with no consumer grew the master by 194 MiB (every
    pending body in memory). With ``--max-body-memory-bytes`` 8 MiB, 200 MiB of bodies grow
    it by far less than that: past the limit they stay in the journal, and every one is
    still delivered."""
    import psutil

    port = free_port()
    node = group.start(
        "n1", "--stomp", f"127.0.0.1:{port}", "--max-body-memory-bytes", str(8 * 2**20)
    )
    wait_until(node.is_master, 30, "n1 to serve")
    process = psutil.Process(node.pid)
    producer = StompPy(("127.0.0.1", port))
    assert producer.send("/queue/big", b"warm-up")
    before = process.memory_info().rss
    body = b"x" * (512 * 1024)
    for number in range(400):
        assert producer.send("/queue/big", body, **{"message-id": f"b{number}"})
    grown = process.memory_info().rss - before
    producer.close()
    assert grown < 64 * 2**20, f"the master grew by {grown / 2**20:.0f} MiB for 200 MiB of bodies"
    consumer = StompPy(("127.0.0.1", port))
    consumer.subscribe("/queue/big", "s", ack="client-individual")
    ids = []
    for _ in range(401):
        message = consumer.message(timeout_s=30)
        ids.append(message.headers["message-id"])
        consumer.connection.ack(message.headers["ack"])
    assert len(set(ids)) == 401
    consumer.close()
