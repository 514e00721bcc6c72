"""Files crafted to pass primacy's first checks, planted in a live share (issue 27, findings 5
and 6): after each, the master is killed and the group must serve again with every
acknowledged message, and ``primacy journal verify`` must say what it found, not crash.

One group of two real ``primacy run`` processes serves the whole module: each test plants
its file, kills the serving master, restarts it (as a slave, or it wins the lock again) and
waits on ``/master``.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from primacy.share.layout import ShareLayout
from primacy.store import messages
from tests.broker.stomppy import StompPy
from tests.harness.cli import primacy
from tests.harness.crafted_files import plant_checkpoint, plant_far_epoch_segment
from tests.harness.group import Group, NodeProcess, free_port

pytestmark = pytest.mark.slow


@dataclass
class Running:
    group: Group
    share: Path
    stomp_ports: dict[str, int]

    def start(self, name: str) -> NodeProcess:
        return self.group.start(name, "--stomp", f"127.0.0.1:{self.stomp_ports[name]}")


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    base = tmp_path_factory.mktemp("crafted")
    (base / "share").mkdir()
    (base / "logs").mkdir()
    group = Group(share=base / "share", log_dir=base / "logs")
    running = Running(group, base / "share", {"a": free_port(), "b": free_port()})
    try:
        for name in running.stomp_ports:
            running.start(name)
        group.wait_for_master(30)
        yield running
    finally:
        group.close()
    for node in group.every_process:
        assert "Traceback" not in node.log(), f"{node.node_id}: {node.log()}"


def _master_after(running: Running, plant: Callable[[Path], object]) -> None:
    """Send a message, plant, kill the master, restart it: a master must serve the message."""
    master = running.group.wait_for_master(30)
    queue = f"/queue/{uuid.uuid4().hex}"
    producer = StompPy(("127.0.0.1", running.stomp_ports[master.node_id]))
    assert producer.send(queue, "kept", **{"message-id": queue})
    producer.close()
    plant(running.share)
    master.signal(signal.SIGKILL)
    master.process.wait(10)
    running.start(master.node_id)
    serving = running.group.wait_for_master(30)
    consumer = StompPy(("127.0.0.1", running.stomp_ports[serving.node_id]))
    consumer.subscribe(queue, "s1")
    assert consumer.message().body == "kept"
    consumer.close()


@pytest.mark.parametrize("number", ["1e999", str(10**30)])
def test_a_checkpoint_with_a_number_out_of_range_costs_no_master(
    running: Running, number: str
) -> None:
    """``1e999`` as its epoch: OverflowError at every takeover, no master ever. ``10**30`` as
    its last sequence: taken, and the new master's first write failed."""
    place = "epoch" if number == "1e999" else "last_sequence"
    _master_after(running, lambda share: plant_checkpoint(share, number, place))
    verify = primacy("journal", "verify", str(running.share))
    assert "Traceback" not in verify.stderr, verify.stderr
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert "PROBLEM: checkpoint skipped: checkpoint-" in verify.stdout


def test_a_far_epoch_segment_with_a_valid_header_costs_no_master(running: Running) -> None:
    """``journal/0000999999-00000000000000000001.seg``, 56 bytes of valid header: every new
    master refused ("the journal already has segments of epoch N or later")."""
    planted: list[Path] = []
    _master_after(running, lambda share: planted.append(plant_far_epoch_segment(share)))
    assert not planted[0].exists()
    quarantine = ShareLayout(running.share).quarantine
    assert any(p.name.startswith(planted[0].name) for p in quarantine.iterdir())
    logs = "".join(node.log() for node in running.group.every_process)
    assert messages.UNCLAIMED_EPOCH_SEGMENT in logs
    verify = primacy("journal", "verify", str(running.share))
    assert "Traceback" not in verify.stderr, verify.stderr
