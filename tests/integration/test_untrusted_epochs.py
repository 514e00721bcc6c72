"""Odd entries in epochs/ neither lose acknowledged messages nor wedge the lock holder."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest

from primacy.client.consumer import Consumer
from primacy.share.port import epochs_claimed_before, latest_epoch
from primacy.share.posix import PosixShare
from primacy.share.records import EpochRecord
from tests.broker.stomppy import StompPy
from tests.harness.cli import primacy
from tests.harness.group import Group, NodeProcess, free_port, wait_until

pytestmark = pytest.mark.slow


def test_an_empty_planted_epoch_far_ahead_costs_no_acknowledged_message(
    group: Group, share: Path
) -> None:
    epochs = share / "epochs"
    epochs.mkdir()
    (epochs / "9999999999").write_bytes(b"")  # a claimant that "died" before writing
    (epochs / "²").write_bytes(b"{}")
    ports = {"a": free_port(), "b": free_port()}
    first = group.start("a", "--stomp", f"127.0.0.1:{ports['a']}")
    wait_until(first.is_master, 30, "a to serve past the planted epochs")
    producer = StompPy(("127.0.0.1", ports["a"]))
    for index in range(5):
        assert producer.send("/queue/q", f"m{index}", **{"message-id": f"id-{index}"})
    producer.close()
    first.signal(signal.SIGKILL)
    first.process.wait(10)
    second = group.start("b", "--stomp", f"127.0.0.1:{ports['b']}")
    wait_until(second.is_master, 30, "b to take over")
    assert latest_epoch(PosixShare(share)) == 10_000_000_001
    consumer = StompPy(("127.0.0.1", ports["b"]))
    consumer.subscribe("/queue/q", "s1")
    bodies = sorted(consumer.message().body for _ in range(5))
    assert bodies == [f"m{index}" for index in range(5)]
    consumer.close()
    stats = primacy("journal", "stats", str(share))
    assert stats.returncode == 0, stats.stderr
    assert "10000000001" in stats.stdout


def _master_with_five_messages_and_a_slave(
    group: Group,
) -> tuple[dict[str, int], NodeProcess, NodeProcess]:
    """Node a serving with m0..m4 receipted, node b waiting: their STOMP ports, a, b."""
    ports = {"a": free_port(), "b": free_port()}
    first = group.start("a", "--stomp", f"127.0.0.1:{ports['a']}")
    wait_until(first.is_master, 30, "a to serve")
    second = group.start("b", "--stomp", f"127.0.0.1:{ports['b']}")
    wait_until(lambda: second.status("/health") == 200, 30, "b to wait as a slave")
    producer = StompPy(("127.0.0.1", ports["a"]))
    for index in range(5):
        assert producer.send("/queue/q", f"m{index}", **{"message-id": f"id-{index}"})
    producer.close()
    return ports, first, second


def test_fifos_at_the_next_epoch_and_in_nodes_neither_hang_nor_stop_a_takeover(
    group: Group, share: Path
) -> None:
    """FIFOs where the next claimant writes its epoch record and where nodes read the
    registry: opened blocking, either would hang the node that meets it. The master is
    killed; the other node must take over past the FIFO and serve every message."""
    import os

    ports, first, second = _master_with_five_messages_and_a_slave(group)
    latest = latest_epoch(PosixShare(share))
    os.mkfifo(share / "epochs" / str(latest + 1))
    os.mkfifo(share / "nodes" / "zzz.json")
    first.signal(signal.SIGKILL)
    first.process.wait(10)
    wait_until(second.is_master, 30, "b to take over past the FIFOs")
    assert latest_epoch(PosixShare(share)) > latest + 1  # the FIFO's number was skipped
    consumer = StompPy(("127.0.0.1", ports["b"]))
    consumer.subscribe("/queue/q", "s1")
    assert sorted(consumer.message().body for _ in range(5)) == [f"m{i}" for i in range(5)]
    consumer.close()
    assert "Traceback" not in second.log()


def test_a_symlink_put_in_place_of_the_lock_file_costs_neither_the_master_nor_a_message(
    group: Group, share: Path, tmp_path: Path
) -> None:
    """The lock file renamed away and a symlink out of the share put in its place under a
    serving master: the group must regain a master, the symlink's target must stay as it
    was, and every acknowledged message must still be there."""
    import os

    from primacy.share.layout import LOCK_FILE_NAME

    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    ports, first, second = _master_with_five_messages_and_a_slave(group)
    os.rename(share / LOCK_FILE_NAME, tmp_path / "lock.moved")
    (share / LOCK_FILE_NAME).symlink_to(outside)
    swapped_at = time.time()

    settled: list[NodeProcess] = []

    def settled_master() -> bool:
        # A master whose lease check passed after the swap holds the lock on the share's own
        # file; the old master cannot pass one (its lock is on the renamed file) and is
        # stepping down, however long a loaded machine makes it take to notice.
        for node in (first, second):
            if node.is_master():
                status = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=5).json()
                if (status["last_keepalive_unix_s"] or 0) > swapped_at:
                    settled[:] = [node]
                    return not (share / LOCK_FILE_NAME).is_symlink()
        return False

    wait_until(settled_master, 30, "a master whose lease holds on a lock file of the share's own")
    assert outside.read_text() == "precious\n"
    # Either node may end up master (the old one notices the swap at its next lease check,
    # steps down, and may replace the symlink itself): read through a failover URL that
    # tries the settled master first.
    order = sorted(ports, key=lambda node_id: node_id != settled[0].node_id)
    url = (
        "failover:("
        + ",".join(f"tcp://127.0.0.1:{ports[node_id]}" for node_id in order)
        + ")?initialReconnectDelay=20&maxReconnectDelay=500&randomize=false&timeout=60000"
    )
    consumer = Consumer(url, "/queue/q")
    bodies = []
    while (message := consumer.receive(timeout_s=3.0)) is not None:
        bodies.append(message.body.decode())
        assert consumer.ack(message)
    consumer.close()
    assert sorted(set(bodies)) == [f"m{i}" for i in range(5)]


def test_claimed_before_jumps_a_planted_gap_instead_of_counting_down(share: Path) -> None:
    port = PosixShare(share)
    for _ in range(3):
        port.claim_epoch(EpochRecord(0, node_id="a"))
    port.layout.epochs.joinpath("9999999999").write_bytes(b"")
    port.layout.epochs.joinpath("10000000000").write_bytes(b"")
    walked = []
    for epoch in epochs_claimed_before(port, 10_000_000_000):
        walked.append(epoch)
        assert len(walked) < 10, "counted down through the gap"
    assert walked == [9_999_999_999, 3, 2, 1]
