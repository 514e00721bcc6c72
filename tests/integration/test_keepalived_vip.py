"""The operator guide's keepalived example, run for real: two ``primacy run`` nodes, each with
Debian's keepalived in its own network namespace, a stock stomp.py producer on the virtual
IP through a kill -9 of the master: the address moves to the new master, is never held by
both, and nothing receipted is lost."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from bench.activemq.workload import FailoverSender, StockStompClient, drain
from tests.harness.group import wait_until
from tests.harness.vip import STOMP_PORT, VIP, VipGroup, unavailable_reason

pytestmark = pytest.mark.slow
QUEUE = "/queue/through-keepalived"


def test_a_killed_master_hands_keepalived_s_address_on_never_held_twice_nothing_lost(
    tmp_path: Path,
) -> None:
    why_not = unavailable_reason()
    if why_not:
        pytest.skip(why_not)
    group = VipGroup(tmp_path, f"k{os.getpid()}")
    held_twice: list[int] = []
    stop = threading.Event()
    result: dict[str, Any] = {}

    def sample() -> None:
        while not stop.wait(0.05):
            if group.held_twice():
                held_twice.append(1)

    def client(master: str) -> None:
        try:
            group.enter_client_namespace()  # this thread, and the producer's it starts
            sender = FailoverSender(StockStompClient([(VIP, STOMP_PORT)]), QUEUE, "vip")
            try:
                sender.resume()
                sender.wait_receipts(10, timeout_s=30)
                generation = sender.generation
                group.kill(master)
                wait_until(lambda: sender.generation > generation, 60, "the producer back")
                sender.wait_receipts(10, timeout_s=60)
                sender.pause()
                result["receipted"] = sender.receipted_ids()
            finally:
                sender.close()
            result["delivered"] = drain((VIP, STOMP_PORT), QUEUE, idle_s=1.0, limit_s=60)
        except BaseException as error:
            result["error"] = error

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        group.start()
        master = group.settled()
        sampler.start()
        worker = threading.Thread(target=client, args=(master,), daemon=True)
        worker.start()
        worker.join(180)
        assert not worker.is_alive() and "error" not in result, result.get("error")
        successor = group.master()
        wait_until(lambda: group.holds_vip(successor), 30, "the address on the new master")
        dead_holds_it = group.holds_vip(master)
    finally:
        stop.set()
        group.close()
    assert successor != master and not dead_holds_it
    assert held_twice == []
    assert set(result["receipted"]) <= set(result["delivered"])
