"""The share's epochs/ deleted under a group that served: no receipted message set aside.

A group coordinated by its share keeps its claims in ``epochs/``. Deleted (an operator
cleaning the share, a restore of the directory apart from the journal), its absence once made
every served segment look unclaimed: the next claim took epoch 1, its opening set the
segments of later epochs aside as unclaimed (``PRIMACY-1412``) and the master after served
without them. Now a node that finds no claim at all beside served segments refuses to claim
(``PRIMACY-1026``) and says why, and once the operator records the journal's newest epoch
(``primacy epochs raise SHARE``) a master serves every message.
"""

from __future__ import annotations

import json
import shutil
import signal
import urllib.request
from pathlib import Path

import pytest

from primacy.share.layout import LOCK_FILE_NAME, ShareLayout
from tests.broker.stomppy import StompPy
from tests.harness.cli import primacy
from tests.harness.group import Group, NodeProcess, free_port, wait_until

pytestmark = pytest.mark.slow

_MESSAGES = 10
_TIMEOUT_S = 30.0


def _status(node: NodeProcess) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/status", timeout=2) as answer:
        return json.load(answer)  # type: ignore[no-any-return]


def _refusing(node: NodeProcess) -> bool:
    try:
        return _status(node)["coordinator_behind_share"] is True
    except OSError:  # its endpoint between two roles
        return False


def _send(port: int, numbers: range) -> None:
    producer = StompPy(("127.0.0.1", port))
    try:
        for number in numbers:
            assert producer.send("/queue/floor", f"m{number}", **{"message-id": f"floor-{number}"})
    finally:
        producer.close()


def _consume(port: int, count: int) -> list[str]:
    """The bodies of ``count`` messages from the queue, sorted; nothing more may be there."""
    consumer = StompPy(("127.0.0.1", port))
    try:
        consumer.subscribe("/queue/floor", "floor")
        got = sorted(consumer.message(_TIMEOUT_S).body for _ in range(count))
        assert consumer.no_message()
    finally:
        consumer.close()
    return got


def test_a_deleted_epochs_directory_sets_no_served_segment_aside(group: Group, share: Path) -> None:
    ports = {"a": free_port(), "b": free_port()}
    nodes = [group.start(name, "--stomp", f"127.0.0.1:{port}") for name, port in ports.items()]
    master = group.wait_for_master(_TIMEOUT_S)
    served_epoch = _status(master)["epoch"]
    assert isinstance(served_epoch, int)
    _send(ports[master.node_id], range(_MESSAGES))

    # The claims go, then the lock file: the master's next check fails, the nodes take the
    # lock again and find no claim beside the journal's segments of ``served_epoch``.
    layout = ShareLayout(share)
    shutil.rmtree(layout.epochs)
    (share / LOCK_FILE_NAME).unlink()
    wait_until(
        lambda: group.masters() == [] and any(_refusing(n) for n in nodes),
        _TIMEOUT_S,
        "the old master to stop and a node to refuse a claim below the share's journal",
    )
    quarantine = layout.quarantine
    assert not quarantine.exists() or list(quarantine.iterdir()) == []  # nothing set aside
    refusing = next(n for n in nodes if _refusing(n))
    assert "PRIMACY-1026" in refusing.log()
    assert f"a master of epoch {served_epoch} wrote" in refusing.log()

    # The operator's repair: the journal's newest epoch recorded as claimed.
    dry = primacy("epochs", "raise", str(share), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"no claim of epoch {served_epoch}" in dry.stdout
    raised = primacy("epochs", "raise", str(share))
    assert raised.returncode == 0, raised.stderr
    assert f"records epoch {served_epoch}" in raised.stdout

    master = group.wait_for_master(_TIMEOUT_S)
    new_epoch = _status(master)["epoch"]
    assert isinstance(new_epoch, int) and new_epoch > served_epoch
    got = _consume(ports[master.node_id], _MESSAGES)
    assert got == sorted(f"m{number}" for number in range(_MESSAGES))


def test_an_epochs_directory_restored_in_part_sets_no_served_segment_aside(
    group: Group, share: Path
) -> None:
    """Three masters' epochs, then ``epochs/`` as an older backup has it: the first claim
    only. The later epochs' segments hold their masters' batches, which no planted header
    does: a node refuses to claim instead of setting them aside (they were, before)."""
    ports = {"a": free_port(), "b": free_port()}
    nodes = {
        name: group.start(name, "--stomp", f"127.0.0.1:{port}") for name, port in ports.items()
    }
    served: list[int] = []
    for turn in range(3):
        master = group.wait_for_master(_TIMEOUT_S)
        epoch = _status(master)["epoch"]
        assert isinstance(epoch, int) and epoch not in served
        served.append(epoch)
        _send(ports[master.node_id], range(turn * 4, turn * 4 + 4))
        if turn < 2:  # a failover: the master killed, restarted as a slave once replaced
            master.signal(signal.SIGKILL)
            group.wait_for_master(_TIMEOUT_S, exclude={master.node_id})
            nodes[master.node_id] = group.start(
                master.node_id, "--stomp", f"127.0.0.1:{ports[master.node_id]}"
            )

    layout = ShareLayout(share)
    for claim in layout.epochs.iterdir():
        if claim.name.isdigit() and int(claim.name) > served[0]:
            claim.unlink()  # the backup's epochs/ knew the first master's claim only
    (share / LOCK_FILE_NAME).unlink()
    wait_until(
        lambda: group.masters() == [] and any(_refusing(n) for n in nodes.values()),
        _TIMEOUT_S,
        "the master to stop and a node to refuse a claim below the share's journal",
    )
    quarantine = layout.quarantine
    assert not quarantine.exists() or list(quarantine.iterdir()) == []  # nothing set aside
    refusing = next(n for n in nodes.values() if _refusing(n))
    assert f"has no claim of epoch {served[-1]}" in refusing.log()

    raised = primacy("epochs", "raise", str(share))
    assert raised.returncode == 0, raised.stderr
    master = group.wait_for_master(_TIMEOUT_S)
    new_epoch = _status(master)["epoch"]
    assert isinstance(new_epoch, int) and new_epoch > served[-1]
    assert _consume(ports[master.node_id], 12) == sorted(f"m{number}" for number in range(12))
