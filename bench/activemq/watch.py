"""Which of a group's ActiveMQ JVMs may run, hold the shared store open, and listen: sampled
every 10 ms by the tests and by bench/compare_activemq.py, so that "never two brokers at
once" is a count over a whole run, not a hope.

A JVM counts from its start until it can run no code of its own (``may_run_its_own_code``);
a killed JVM that stays longer, blocked in the kernel, is recorded in ``lingered``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Self

import psutil

from bench.activemq.under_primacy import ActiveMQUnderPrimacy
from tests.harness.processes import command_line, may_run_its_own_code


class BrokerWatch:
    """Samples, every 10 ms, which of our ActiveMQ JVMs may run and which listen."""

    def __init__(self, bases: dict[str, Path], ports: dict[str, int]) -> None:
        self._bases, self._ports = bases, ports
        self.overlaps: list[tuple[str, ...]] = []  # samples with more than one JVM alive
        self.listening_overlaps: list[tuple[str, ...]] = []
        self.lingered: set[str] = set()  # nodes whose killed JVM outstayed its kill
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _ours(self) -> dict[str, int]:
        """Our JVMs by node, killed or not (the supervisors' command lines name them too)."""
        found: dict[str, int] = {}
        for proc in psutil.process_iter(["name"]):
            if proc.info["name"] != "java":
                continue
            command = command_line(proc.pid)
            for node_id, base in self._bases.items():
                if f"-Dactivemq.base={base}" in command:
                    found[node_id] = proc.pid
        return found

    def running(self) -> dict[str, int]:
        """Our JVMs that may still run their own code, by node."""
        running = {}
        for node_id, pid in self._ours().items():
            if may_run_its_own_code(pid):
                running[node_id] = pid
            else:
                self.lingered.add(node_id)
        return running

    def _listening(self, node_id: str, pid: int) -> bool:
        try:
            return any(
                c.status == psutil.CONN_LISTEN and c.laddr.port == self._ports[node_id]
                for c in psutil.Process(pid).net_connections(kind="tcp")
            )
        except psutil.Error:
            return False

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self.samples += 1
            time.sleep(0.01)

    def _sample(self) -> None:
        """One look: never two JVMs running, never two listening."""
        running = self.running()
        if len(running) > 1:
            self.overlaps.append(tuple(sorted(running)))
        self._sample_listening(running)

    def _sample_listening(self, running: dict[str, int]) -> None:
        listening = [n for n, p in running.items() if self._listening(n, p)]
        if len(listening) > 1:
            self.listening_overlaps.append(tuple(sorted(listening)))


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:  # closed since the listing
        return ""


class StoreWatch(BrokerWatch):
    """BrokerWatch, plus which JVMs hold the shared store open: those past their gates. A cold
    group (no gate) is also held to BrokerWatch's rule: never two JVMs at all."""

    def __init__(self, amq: ActiveMQUnderPrimacy) -> None:
        super().__init__(amq.bases, amq.stomp_ports)
        self._warm = amq.warm
        # Each node's own path to the store (emulated hosts mount one directory each).
        self._stores = {node_id: str(share / "activemq") for node_id, share in amq.shares.items()}
        self.seen_in_store: set[str] = set()  # every node whose JVM was ever seen inside
        self.store_overlaps: list[tuple[str, ...]] = []
        self.store_samples = 0

    def two_at_once(self) -> int:
        """Samples that broke a rule: two JVMs running (cold), in the store, or listening."""
        return len(self.overlaps) + len(self.store_overlaps) + len(self.listening_overlaps)

    def in_store(self, running: dict[str, int] | None = None) -> list[str]:
        """The nodes whose running JVM has a descriptor open under the shared store."""
        found = []
        for node_id, pid in (self.running() if running is None else running).items():
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:  # it has just ended
                continue
            links = [_link(f"/proc/{pid}/fd/{fd}") for fd in fds]
            if any(link.startswith(self._stores[node_id]) for link in links):
                found.append(node_id)
        return found

    def _sample(self) -> None:
        """Both JVMs run by design when warm: what must never be two is past the gate, and
        listening."""
        running = self.running()
        if not self._warm and len(running) > 1:
            self.overlaps.append(tuple(sorted(running)))
        inside = self.in_store(running)
        self.seen_in_store.update(inside)
        self.store_samples += 1
        if len(inside) > 1:
            self.store_overlaps.append(tuple(sorted(inside)))
        self._sample_listening(running)
