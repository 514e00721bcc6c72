"""Issue 45, item 2: the share remembers how the group locks it, and a node that would not see the
group's lock refuses to start instead of fencing the master.

On 173b3ec a node started with the README's flags (``flock``, the default) beside a group
on ``posix`` locks took "the lock" while the master held it and claimed an epoch: the master
stopped with PRIMACY-1514 (JournalFenced).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from primacy.cli.group_agreement import join_group
from primacy.cli.localgroup import Group, NodeProcess
from primacy.share import group_settings, safe_io
from primacy.share.group_settings import GroupSettings, agree_group_settings
from primacy.share.layout import ShareLayout
from primacy.supervisor.config import NodeConfig
from tests.harness.cli import primacy
from tests.harness.group import wait_until


def _exited(node: NodeProcess, timeout_s: float = 30.0) -> int:
    try:
        return node.process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{node.node_id} did not stop: {node.log()[-2000:]}")


def _epoch(node: NodeProcess) -> int:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/status", timeout=2) as answer:
        epoch = json.load(answer)["epoch"]
    assert isinstance(epoch, int)
    return epoch


@pytest.mark.slow
def test_a_node_with_the_other_lock_method_refuses_and_a_default_one_follows(
    group: Group, share: Path
) -> None:
    master = group.start("n1", "--lock-method", "posix")
    assert group.wait_for_master(30) is master
    recorded = json.loads(ShareLayout(share).group_settings.read_text())
    assert recorded["lock_method"] == "posix" and recorded["recorded_by"] == "n1"

    other = group.start("n2", "--lock-method", "flock")
    assert _exited(other) == 2
    assert "PRIMACY-2060" in other.log()
    assert "uses lock_method = 'posix' (recorded by n1); this node is set to 'flock'" in other.log()
    assert _epoch(master) == 1 and group.masters() == [master]

    follower = group.start("n3")  # the README's flags: lock_method left at its default
    wait_until(lambda: follower.status("/slave") == 200, 30, "n3 a slave")
    assert "PRIMACY-2062" in follower.log()
    assert group.masters() == [master]
    master.signal(signal.SIGKILL)
    assert group.wait_for_master(30, exclude={"n1"}) is follower
    assert _epoch(follower) == 2


@pytest.mark.slow
def test_another_coordination_and_an_unreadable_record_refuse_the_start(
    group: Group, share: Path
) -> None:
    layout = ShareLayout(share)
    agree_group_settings(layout, GroupSettings("flock", recorded_by="n1"))
    zookeeper = group.start(
        "z1",
        "--coordination",
        "zookeeper",
        "--zookeeper-hosts",
        "127.0.0.1:1",
        "--zookeeper-allow-open-acl",
    )
    assert _exited(zookeeper) == 2
    assert "PRIMACY-2060" in zookeeper.log() and "coordination = 'share'" in zookeeper.log()

    layout.group_settings.write_text('{"lock_method": "fcntl"}')
    garbled = group.start("n2")
    assert _exited(garbled) == 2
    assert "PRIMACY-2061" in garbled.log()
    assert not list(layout.epochs.glob("*")) if layout.epochs.exists() else True


def test_two_first_nodes_record_one_setting(share: Path) -> None:
    layout = ShareLayout(share)
    results: list[GroupSettings] = []
    barrier = threading.Barrier(8)

    def first(method: str, node: str) -> None:
        barrier.wait()
        results.append(agree_group_settings(layout, GroupSettings(method, recorded_by=node)))

    threads = [
        threading.Thread(target=first, args=("flock" if i % 2 else "posix", f"n{i}"))
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Every node got an answer (none read a half-written record) and all the same one.
    assert len(results) == len(threads)
    assert len({(r.lock_method, r.recorded_by) for r in results}) == 1
    assert not [name for name in os.listdir(share) if name.endswith(".tmp")]
    assert json.loads(layout.group_settings.read_text())["recorded_by"] == results[0].recorded_by


def test_a_node_started_while_the_first_writes_the_record_joins_it(
    share: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three nodes started at once under load: the third read the first one's record between
    its creation and its content, and refused its start (PRIMACY-2061). It waits instead."""
    layout = ShareLayout(share)
    config = NodeConfig(node_id="n3", share=share)
    fd = safe_io.create_exclusive(layout.group_settings, share_root=True)  # n1, mid-write
    reads = 0
    real_read = group_settings.read_group_settings

    def counted_read(layout: ShareLayout) -> GroupSettings | None:
        nonlocal reads
        reads += 1
        return real_read(layout)

    monkeypatch.setattr(group_settings, "read_group_settings", counted_read)
    joined: list[GroupSettings] = []
    failed: list[BaseException] = []

    def join() -> None:
        try:
            joined.append(join_group(config, lambda _config: None)[1])
        except BaseException as exc:
            failed.append(exc)

    joiner = threading.Thread(target=join)
    joiner.start()
    wait_until(lambda: reads > 0 or not joiner.is_alive(), 10, "n3 to read the empty record")
    record = GroupSettings("posix", recorded_by="n1", recorded_at_unix_s=1.0)
    os.write(fd, json.dumps(record.to_json()).encode())
    os.close(fd)
    joiner.join(10)
    assert failed == [] and [r.recorded_by for r in joined] == ["n1"]


def test_the_doctor_reads_the_record(share: Path) -> None:
    layout = ShareLayout(share)
    agree_group_settings(layout, GroupSettings("posix", recorded_by="n1"))
    # A local disk's profile says flock: the doctor says the group differs, and how to switch.
    differs = primacy("doctor", str(share))
    assert "PRIMACY-3061" in differs.stdout, differs.stdout
    assert "the group locks the share with 'posix'" in differs.stdout

    layout.group_settings.write_text("[not json")
    unreadable = primacy("doctor", str(share))
    assert unreadable.returncode == 2
    assert "PRIMACY-3060" in unreadable.stdout, unreadable.stdout
