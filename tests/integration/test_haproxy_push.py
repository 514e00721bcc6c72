"""Real ``primacy run`` nodes behind a real HAProxy set as the operator guide says, pushing to
its runtime API: a kill -9 of the master, a stock stomp.py producer through HAProxy, nothing
receipted lost, never two servers ready at once, and the new master raised by the push."""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.activemq.workload import FailoverSender, StockStompClient, drain
from primacy.supervisor import codes
from tests.harness.group import Group, free_port, wait_until
from tests.harness.guide_examples import guide_example, haproxy_config
from tests.harness.haproxy import HAPROXY, Haproxy

pytestmark = pytest.mark.slow
BACKEND = "primacy_stomp"
QUEUE = "/queue/through-haproxy-push"
NODES = ("node-a", "node-b")


def _checks_that_never_come() -> str:
    """The guide's ``default-server`` line with checks an hour apart: what HAProxy shows within
    this test is then what the pushes made it (HAProxy's start aside)."""
    (line,) = re.findall(r"^\s*(default-server .*)$", guide_example("Load balancer: HAProxy"), re.M)
    changed = re.sub(r"\binter \S+", "inter 1h", line)
    assert changed != line, "the guide's default-server line sets no check interval"
    return changed


class ReadySampler:
    """Asks HAProxy every 10 ms which servers take new connections; keeps every answer that
    names more than one."""

    def __init__(self, proxy: Haproxy) -> None:
        self.proxy = proxy
        self.samples = 0
        self.two_ready: list[set[str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ReadySampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            ready = self.proxy.ready(BACKEND)
            self.samples += 1
            if len(ready) > 1:
                self.two_ready.append(ready)


@pytest.fixture
def proxied_group(group: Group, tmp_path: Path) -> Iterator[tuple[Haproxy, int]]:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    ports = {node_id: (free_port(), free_port()) for node_id in NODES}  # STOMP, HTTP
    front = free_port()
    config = haproxy_config(
        front, ports, free_port(), replace={"default-server": _checks_that_never_come()}
    )
    proxy = Haproxy(tmp_path, config)
    try:
        for node_id, (stomp_port, http_port) in ports.items():
            group.start(
                node_id,
                "--stomp",
                f"127.0.0.1:{stomp_port}",
                "--haproxy-runtime-api",
                proxy.tcp_address,
                http_port=http_port,
            )
        yield proxy, front
    finally:
        proxy.stop()


def test_a_killed_master_is_replaced_in_haproxy_by_the_push_never_two_ready_nothing_lost(
    group: Group, proxied_group: tuple[Haproxy, int]
) -> None:
    proxy, front = proxied_group
    master = group.wait_for_master(timeout_s=30)
    wait_until(lambda: proxy.ready(BACKEND) == {master.node_id}, 15, "HAProxy: the master alone")
    sender = FailoverSender(StockStompClient([("127.0.0.1", front)]), QUEUE, "push")
    try:
        with ReadySampler(proxy) as sampler:
            sender.resume()
            sender.wait_receipts(20, timeout_s=30)
            generation = sender.generation
            master.signal(signal.SIGKILL)
            successor = group.wait_for_master(timeout_s=30)
            wait_until(lambda: sender.generation > generation, 30, "the producer to reconnect")
            sender.wait_receipts(20, timeout_s=30)
            sender.pause()
        receipted = sender.receipted_ids()
    finally:
        sender.close()
    assert sampler.samples > 10 and sampler.two_ready == []
    assert proxy.ready(BACKEND) == {successor.node_id}
    # The push did it: with checks an hour apart only the runtime API can raise a server.
    assert f"Server {BACKEND}/{successor.node_id} is UP, changed from CLI" in proxy.log()
    assert codes.LB_TOLD in successor.log()
    delivered = drain(("127.0.0.1", front), QUEUE, idle_s=1.0, limit_s=60)
    assert set(receipted) <= set(delivered), set(receipted) - set(delivered)
