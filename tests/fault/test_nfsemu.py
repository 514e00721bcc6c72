"""The NFSv4 lease emulator itself, with real mounts: locks, coherence, partitions, leases."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from primacy.locker.lease import Lease, LeaseLost
from primacy.share.posix import PosixShare
from tests.harness.emulated_hosts import EmulatedHosts
from tests.harness.group import wait_until
from tests.harness.nfsemu import EmulatedHost, is_mounted

pytestmark = pytest.mark.fuse

LEASE_S = 1.0


@contextmanager
def opened(path: Path, flags: int = os.O_RDWR | os.O_CREAT) -> Iterator[int]:
    fd = os.open(path, flags, 0o644)
    try:
        yield fd
    finally:
        try:
            os.close(fd)
        except OSError:
            pass  # a close during a partition may fail; the fd is gone anyway


def can_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def can_lockf(fd: int) -> bool:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    fcntl.lockf(fd, fcntl.LOCK_UN)
    return True


def in_thread(action: Callable[[], object]) -> tuple[threading.Thread, dict[str, object]]:
    """Run ``action`` on a daemon thread; the dict gets its result or error."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = action()
        except OSError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def assert_eio(action: Callable[[], object]) -> None:
    with pytest.raises(OSError) as caught:
        action()
    assert caught.value.errno == errno.EIO, caught.value


@pytest.fixture
def two_hosts(emulated_hosts: EmulatedHosts) -> tuple[EmulatedHost, EmulatedHost]:
    a, b = emulated_hosts(2, lease_s=LEASE_S)
    return a, b


# --- locks across mounts ------------------------------------------------------


@pytest.mark.parametrize("take", [fcntl.flock, fcntl.lockf], ids=["flock", "lockf"])
def test_a_lock_through_one_mount_excludes_both_kinds_through_another(
    two_hosts: tuple[EmulatedHost, EmulatedHost], take: Callable[[int, int], None]
) -> None:
    a, b = two_hosts
    with opened(a.share / "lock") as held, opened(b.share / "lock") as other:
        take(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert not can_flock(other)
        assert not can_lockf(other)
    # Closing the descriptor drops either kind, on the server too. The kernel hands a
    # closed file's release to the FUSE client after close() returns: wait until a's
    # client has none open (its RELEASE arrived) before asking through the other mount.
    wait_until(lambda: a.status()["open_files"] == 0, 5, "a's release of the lock file")
    with opened(b.share / "lock") as other:
        assert can_flock(other) and can_lockf(other)


def test_a_blocking_lock_through_another_mount_waits_for_the_release(
    two_hosts: tuple[EmulatedHost, EmulatedHost],
) -> None:
    a, b = two_hosts
    with opened(a.share / "lock") as held, opened(b.share / "lock") as other:
        fcntl.flock(held, fcntl.LOCK_EX)
        thread, outcome = in_thread(lambda: fcntl.flock(other, fcntl.LOCK_EX))
        thread.join(0.3)
        assert thread.is_alive()
        fcntl.flock(held, fcntl.LOCK_UN)
        thread.join(5)
        assert not thread.is_alive() and "error" not in outcome


def test_a_write_through_one_mount_is_read_through_another_at_once(
    two_hosts: tuple[EmulatedHost, EmulatedHost],
) -> None:
    a, b = two_hosts
    with opened(a.share / "data") as writer, opened(b.share / "data") as reader:
        for round_ in range(20):
            payload = f"round {round_}\n".encode()
            os.pwrite(writer, payload, 0)
            assert os.pread(reader, 100, 0) == payload
        os.write(writer, b"x" * 4096)  # grows the file
        assert os.fstat(reader).st_size == os.fstat(writer).st_size
        assert (b.share / "data").stat().st_size == os.fstat(writer).st_size


def test_a_file_created_through_one_mount_is_listed_through_another(
    two_hosts: tuple[EmulatedHost, EmulatedHost],
) -> None:
    # Regression: entries without an inode were listed as d_ino 0, which readdir(3)
    # skips, so every listing was empty and a new master recovered no journal.
    a, b = two_hosts
    (a.share / "journal").mkdir()
    (a.share / "journal" / "segment").write_bytes(b"x")
    assert os.listdir(b.share / "journal") == ["segment"]
    (b.share / "journal" / "another").write_bytes(b"y")
    assert sorted(os.listdir(a.share / "journal")) == ["another", "segment"]


def test_eio_under_a_prefix_fails_only_those_paths_until_cleared(
    two_hosts: tuple[EmulatedHost, EmulatedHost],
) -> None:
    a, b = two_hosts
    (a.share / "journal").mkdir()
    (a.share / "journal" / "segment").write_bytes(b"x")
    a.eio_under("/journal")
    with pytest.raises(OSError) as failed:
        (a.share / "journal" / "segment").read_bytes()
    assert failed.value.errno == errno.EIO
    (a.share / "elsewhere").write_bytes(b"fine")  # the rest of the share works
    assert (b.share / "journal" / "segment").read_bytes() == b"x"  # other hosts too
    a.clear_faults()
    assert (a.share / "journal" / "segment").read_bytes() == b"x"


def test_slow_fsync_delays_fsync_through_that_mount(
    two_hosts: tuple[EmulatedHost, EmulatedHost],
) -> None:
    a, _ = two_hosts
    assert a.slow_fsync(300)["fsync_delay_ms"] == 300
    with opened(a.share / "data") as fd:
        os.write(fd, b"x")
        done = threading.Event()
        thread = threading.Thread(target=lambda: (os.fsync(fd), done.set()))
        thread.start()
        assert not done.wait(0.1)  # still waiting out the delay
        thread.join(5)
        assert done.is_set()
    assert a.clear_faults()["fsync_delay_ms"] == 0


# --- partitions ----------------------------------------------------------------


def test_partition_eio_fails_every_operation_until_heal(
    two_hosts: tuple[EmulatedHost, EmulatedHost],
) -> None:
    a, b = two_hosts
    (a.share / "data").write_bytes(b"before")
    with opened(a.share / "data") as fd:
        a.partition("eio")
        assert_eio(lambda: os.stat(a.share / "data"))
        assert_eio(lambda: os.listdir(a.share))
        assert_eio(lambda: os.open(a.share / "new", os.O_CREAT | os.O_WRONLY))
        assert_eio(lambda: os.pread(fd, 10, 0))
        assert_eio(lambda: os.pwrite(fd, b"during", 0))
        assert_eio(lambda: os.fsync(fd))
        assert (b.share / "data").read_bytes() == b"before"  # the other host is unaffected
        a.heal()
        assert os.pread(fd, 10, 0) == b"before"  # shorter than the lease: nothing lost
    assert (a.share / "data").read_bytes() == b"before"


def test_partition_hang_blocks_an_operation_until_heal(
    two_hosts: tuple[EmulatedHost, EmulatedHost],
) -> None:
    a, _ = two_hosts
    (a.share / "data").write_bytes(b"x")
    a.partition("hang")
    thread, outcome = in_thread(lambda: os.stat(a.share / "data").st_size)
    thread.join(0.5)
    assert thread.is_alive(), "the operation should hang while partitioned"
    a.heal()
    thread.join(5)
    assert outcome == {"result": 1}


def test_stop_releases_a_hung_operation_and_leaves_nothing_mounted(
    two_hosts: tuple[EmulatedHost, EmulatedHost],
) -> None:
    a, _ = two_hosts
    a.partition("hang")
    thread, outcome = in_thread(lambda: os.listdir(a.share))
    thread.join(0.3)
    assert thread.is_alive()
    a.stop()
    thread.join(5)
    assert not thread.is_alive() and "error" in outcome
    assert not is_mounted(a.mountpoint)
    assert a.process.poll() is not None


def test_a_partition_shorter_than_the_lease_keeps_the_lock(
    emulated_hosts: EmulatedHosts,
) -> None:
    a, b = emulated_hosts(2, lease_s=30.0)
    with opened(a.share / "lock") as held, opened(b.share / "lock") as other:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        a.partition("eio")
        time.sleep(0.3)
        assert not can_flock(other)
        a.heal()
        assert not can_flock(other)
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # re-asserts on the old descriptor
        os.pwrite(held, b"still mine", 0)


# --- lease expiry ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["eio", "hang"])
def test_after_the_lease_expires_another_host_takes_the_lock(
    two_hosts: tuple[EmulatedHost, EmulatedHost], mode: str
) -> None:
    a, b = two_hosts
    with opened(a.share / "lock") as held, opened(b.share / "lock") as other:
        fcntl.lockf(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        a.partition(mode)  # type: ignore[arg-type]
        assert not can_lockf(other)
        time.sleep(LEASE_S * 1.5)
        assert a.status()["lease_expired"]
        fcntl.lockf(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        a.heal()


def test_after_heal_a_descriptor_that_held_a_lock_fails_with_eio(
    two_hosts: tuple[EmulatedHost, EmulatedHost],
) -> None:
    a, b = two_hosts
    (a.share / "unlocked").write_bytes(b"plain")
    with opened(a.share / "lock") as held, opened(a.share / "unlocked") as plain:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        a.partition("eio")
        a.expire_lease()  # the same as waiting lease_s, without the wait
        with opened(b.share / "lock") as other:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        a.heal()
        assert_eio(lambda: os.pread(held, 10, 0))
        assert_eio(lambda: os.pwrite(held, b"late", 0))
        assert_eio(lambda: fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB))
        # As on Linux's NFS client, only lock state is lost: the plain open recovers.
        assert os.pread(plain, 10, 0) == b"plain"
    with opened(a.share / "lock") as fresh:  # and new opens work
        assert can_flock(fresh)


def test_an_unlock_during_a_partition_is_applied_on_heal(
    emulated_hosts: EmulatedHosts,
) -> None:
    a, b = emulated_hosts(2, lease_s=30.0)
    held = os.open(a.share / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    a.partition("eio")
    try:
        os.close(held)  # the unlock cannot reach the server now
    except OSError as exc:
        assert exc.errno == errno.EIO
    with opened(b.share / "lock") as other:
        assert not can_lockf(other)
        a.heal()
        assert can_lockf(other)
    wait_until(lambda: a.status()["open_files"] == 0, 5, "the deferred close on heal")


# --- the real locker on emulated hosts ------------------------------------------


@pytest.mark.parametrize("mode", ["eio", "hang"])
def test_a_lease_moves_to_another_host_after_expiry_and_the_old_one_learns_it(
    two_hosts: tuple[EmulatedHost, EmulatedHost], mode: str
) -> None:
    a, b = two_hosts
    on_a, on_b = Lease(PosixShare(a.share), "node-a"), Lease(PosixShare(b.share), "node-b")
    assert on_a.try_acquire()
    first = on_a.claim_epoch()
    on_a.revalidate()
    assert not on_b.try_acquire()

    a.partition(mode)  # type: ignore[arg-type]
    time.sleep(LEASE_S * 1.5)
    assert on_b.try_acquire()
    assert on_b.claim_epoch() == first + 1
    on_b.revalidate()

    a.heal()
    with pytest.raises(LeaseLost):
        on_a.revalidate()
    on_b.revalidate()
    on_a.abandon()
    on_b.release()


# --- a supervisor on an emulated host --------------------------------------------


@pytest.mark.slow
def test_a_supervisor_on_a_hung_mount_stops_claiming_master_and_is_torn_down(
    two_hosts: tuple[EmulatedHost, EmulatedHost], emulated_hosts: EmulatedHosts
) -> None:
    a, _ = two_hosts
    keep_alive_ms = 500
    node = emulated_hosts.start_node(
        a,
        "n1",
        "--lock-keep-alive-period-ms",
        str(keep_alive_ms),
        "--lock-acquire-sleep-interval-ms",
        "100",
    )
    wait_until(node.is_master, 20, "n1 serves as master on its emulated mount")
    a.partition("hang")
    wait_until(
        lambda: node.status("/master", timeout_s=0.3) != 200,
        2 * keep_alive_ms / 1000,
        "n1 stops claiming /master while its share hangs",
    )
    # Teardown kills n1 while its keepalive is still stuck in the hung mount:
    # the fixture must fail the hung request first, or SIGKILL cannot land.
