"""The share watcher with real inotify: it wakes a slave on the changes that matter, and the
kernel is never asked for the opens and reads a busy master makes on the share."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.share.layout import LOCK_FILE_NAME, NODES_DIR_NAME, PAUSED_FILE_NAME, ShareLayout
from primacy.share.safe_io import write_json_atomically
from primacy.share.watch import ShareWatcher
from tests.harness.group import wait_until

IN_ACCESS, IN_CLOSE_NOWRITE, IN_OPEN = 0x1, 0x10, 0x20
WAIT_S = 10.0


class Wakeups:
    def __init__(self) -> None:
        self.master_left = threading.Event()
        self.pause_changed = threading.Event()


@pytest.fixture
def watcher(tmp_path: Path) -> Iterator[tuple[Path, Wakeups, ShareWatcher]]:
    (tmp_path / NODES_DIR_NAME).mkdir()
    wakeups = Wakeups()
    watcher = ShareWatcher(
        ShareLayout(tmp_path), "n1", wakeups.master_left.set, wakeups.pause_changed.set
    )
    watcher.start()
    try:
        yield tmp_path, wakeups, watcher
    finally:
        watcher.stop()


@pytest.fixture
def watched(watcher: tuple[Path, Wakeups, ShareWatcher]) -> tuple[Path, Wakeups]:
    return watcher[0], watcher[1]


def inotify_masks() -> list[int]:
    """The event mask of every inotify watch this process holds, as the kernel reports it."""
    masks = []
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            lines = Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines()
        except OSError:
            continue  # closed meanwhile
        for line in lines:
            if line.startswith("inotify wd:"):
                fields = dict(field.split(":", 1) for field in line.split()[1:])
                masks.append(int(fields["mask"], 16))
    return masks


def test_the_kernel_is_not_asked_for_opens_or_reads_on_the_share(
    watched: tuple[Path, Wakeups],
) -> None:
    masks = inotify_masks()
    assert len(masks) >= 2, "the share and its node registry are both watched"
    for mask in masks:
        assert mask & (IN_OPEN | IN_CLOSE_NOWRITE | IN_ACCESS) == 0, hex(mask)


def test_closing_the_lock_file_wakes_the_slave(watched: tuple[Path, Wakeups]) -> None:
    share, wakeups = watched
    fd = os.open(share / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT)
    os.close(fd)  # a master letting its lock go
    assert wakeups.master_left.wait(WAIT_S)


def test_deleting_the_lock_file_wakes_the_slave(watched: tuple[Path, Wakeups]) -> None:
    share, wakeups = watched
    lock = share / LOCK_FILE_NAME
    lock.write_bytes(b"")
    wakeups.master_left.clear()  # the close of that write woke it already
    lock.unlink()
    assert wakeups.master_left.wait(WAIT_S)


def test_a_master_publishing_that_it_stopped_wakes_the_slave(
    watcher: tuple[Path, Wakeups, ShareWatcher],
) -> None:
    share, wakeups, seen = watcher

    def publish(node_id: str, role: str) -> None:
        path = share / NODES_DIR_NAME / f"{node_id}.json"
        write_json_atomically(path, {"node_id": node_id, "role": role}, durable=False)

    publish("n2", "master")
    publish("n3", "slave")
    # Not the order of other events: watchdog holds a rename back to pair its halves.
    wait_until(
        lambda: seen.roles_seen() == {"n2": "master", "n3": "slave"}, WAIT_S, "both entries read"
    )
    assert not wakeups.master_left.is_set(), "a master taking the role is no reason to wake"
    publish("n2", "stopped")
    assert wakeups.master_left.wait(WAIT_S)


def test_the_pause_marker_is_noticed(watched: tuple[Path, Wakeups]) -> None:
    share, wakeups = watched
    (share / PAUSED_FILE_NAME).write_text("{}")
    assert wakeups.pause_changed.wait(WAIT_S)
    wakeups.pause_changed.clear()
    (share / PAUSED_FILE_NAME).unlink()
    assert wakeups.pause_changed.wait(WAIT_S)
