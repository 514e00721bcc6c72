"""Test-only helpers on top of supervisor.localgroup: a concurrent /master poller."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from supervisor.localgroup import Group, NodeProcess, free_port, http_status, wait_until

__all__ = [
    "Answer",
    "Group",
    "MasterPoller",
    "NodeProcess",
    "free_port",
    "http_status",
    "wait_until",
]


@dataclass(frozen=True)
class Answer:
    node_id: str
    sent_at: float
    received_at: float
    status: int | None


class MasterPoller:
    """Polls /master on every node concurrently, one thread per node, until stopped.

    ``overlaps()`` lists pairs of 200 answers from different nodes whose
    request/response intervals overlap: any such pair means two nodes may
    have claimed the master role at the same instant.
    """

    def __init__(self, nodes: Iterable[NodeProcess]) -> None:
        self._stop = threading.Event()
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._initial = list(nodes)

    def __enter__(self) -> MasterPoller:
        for node in self._initial:
            self.add(node)
        return self

    def add(self, node: NodeProcess) -> None:
        """Start polling one more node (a restarted node listens on a new port)."""
        thread = threading.Thread(target=self._poll, args=(node,), daemon=True)
        self._threads.append(thread)
        thread.start()

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)

    def _poll(self, node: NodeProcess) -> None:
        connection: http.client.HTTPConnection | None = None
        while not self._stop.is_set() and (node.alive() or connection is not None):
            if connection is None:
                connection = http.client.HTTPConnection("127.0.0.1", node.port, timeout=2)
            sent = time.monotonic()
            try:
                connection.request("GET", "/master")
                response = connection.getresponse()
                response.read()
                status: int | None = response.status
            except (OSError, http.client.HTTPException):
                status = None
                connection.close()
                connection = None
            received = time.monotonic()
            with self._lock:
                self.answers.append(Answer(node.node_id, sent, received, status))
            if status is None:
                time.sleep(0.01)

    def overlaps(self) -> list[tuple[Answer, Answer]]:
        oks = sorted((a for a in self.answers if a.status == 200), key=lambda a: a.sent_at)
        found = []
        for index, first in enumerate(oks):
            for second in oks[index + 1 :]:
                if second.sent_at > first.received_at:
                    break
                if second.node_id != first.node_id:
                    found.append((first, second))
        return found
