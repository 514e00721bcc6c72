"""Test-only helpers on top of cli.localgroup: a concurrent /master poller."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from primacy.cli.localgroup import Group, NodeProcess, free_port, http_status, wait_until

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
    epoch: int | None = None
    decided_at: float | None = None  # the node's monotonic clock when it decided (same host)


class MasterPoller:
    """Polls /master on every node concurrently, one thread per node, until stopped.

    ``two_masters()`` judges the 200 answers by when each node *decided* (the
    answer's ``decided_at_monotonic``; every node runs on this host, so their
    monotonic clocks are one clock) and by epoch: two masters at once means a
    node of an older epoch decided it was master after a node of a newer epoch
    did, or two nodes did under one epoch. When an answer was delivered says
    nothing: a master frozen (SIGSTOP) between deciding and writing its answer
    delivers a 200 decided before its successor took over.
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
            body: dict[str, Any] = {}
            try:
                connection.request("GET", "/master")
                response = connection.getresponse()
                raw = response.read()
                status: int | None = response.status
                body = json.loads(raw) if status in (200, 503) else {}
            except (OSError, http.client.HTTPException, ValueError):
                status = None
                connection.close()
                connection = None
            received = time.monotonic()
            answer = Answer(
                node.node_id,
                sent,
                received,
                status,
                body.get("epoch"),
                body.get("decided_at_monotonic"),
            )
            with self._lock:
                self.answers.append(answer)
            if status is None:
                time.sleep(0.01)

    def epochs_seen_serving(self) -> set[int]:
        """The epochs whose master answered 200 to the poller."""
        with self._lock:
            return {a.epoch for a in self.answers if a.status == 200 and a.epoch is not None}

    def two_masters(self) -> list[tuple[Answer, Answer]]:
        """Pairs (a 200 decided later, the newer-epoch 200 it contradicts), in decision order."""
        decided = sorted(
            ((*_decision(a), a) for a in self.answers if a.status == 200), key=lambda d: d[0]
        )
        found = []
        newest: tuple[float, int, Answer] | None = None  # the highest-epoch 200 so far
        for at, epoch, answer in decided:
            if newest is not None and (
                epoch < newest[1] or (epoch == newest[1] and answer.node_id != newest[2].node_id)
            ):
                found.append((answer, newest[2]))
            elif newest is None or epoch > newest[1]:
                newest = (at, epoch, answer)
        return found


def _decision(answer: Answer) -> tuple[float, int]:
    if answer.decided_at is None or answer.epoch is None:
        raise AssertionError(f"a 200 answer without its epoch or decision time: {answer}")
    return answer.decided_at, answer.epoch
