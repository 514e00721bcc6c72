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
