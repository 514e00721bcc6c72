"""Who may open the lock file (issue 27, finding 13): outside the shipped unit it was created
0644, and an unprivileged user's ``flock`` on a read-only descriptor kept the group without a
master while ``primacy doctor`` said ok. Real ``primacy run`` nodes, a real user other than
theirs, the real ``primacy doctor``."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.nfs_profiles import codes
from primacy.share.layout import ShareLayout
from tests.harness.cli import primacy
from tests.harness.group import Group, wait_until

pytestmark = pytest.mark.slow

NOBODY = 65534
# An interpreter another user may run (this virtualenv's may sit in root's home).
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
# Run as another user: open the lock file read-only and take flock on it, say what happened.
ATTACKER = """
import fcntl, os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError as exc:
    print(f"refused: {exc.strerror}", flush=True)
    sys.exit(0)
print("locked", flush=True)
sys.stdin.read()  # holds the lock until the test closes our stdin
"""


@pytest.fixture
def open_share() -> Iterator[Path]:
    """A share other users can reach (pytest's own temporary directories are 0700), as a
    share on a mount is; its directories as an operator makes them (0755)."""
    base = Path(tempfile.mkdtemp(prefix="primacy-modes-"))
    try:
        base.chmod(0o755)
        (base / "share").mkdir(mode=0o755)
        yield base / "share"
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.mark.skipif(
    os.geteuid() != 0 or SYSTEM_PYTHON is None,
    reason="running a process as another user needs root and a system python3",
)
def test_another_user_cannot_lock_the_lock_file_and_keep_the_group_without_a_master(
    open_share: Path, tmp_path: Path
) -> None:
    group = Group(share=open_share, log_dir=tmp_path)
    try:
        first = group.start("a")
        wait_until(first.is_master, 30, "a to serve")
        first.signal(signal.SIGTERM)  # a graceful stop: the lock is free, the file stays
        first.process.wait(30)
        lock = ShareLayout(open_share).lock_file
        attacker = subprocess.Popen(
            [str(SYSTEM_PYTHON), "-c", ATTACKER, str(lock)],
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert attacker.stdout is not None
            said = attacker.stdout.readline().strip()  # "locked" on 650910f: no master after
            second = group.start("b")
            wait_until(second.is_master, 30, f"b to serve (the other user's flock: {said})")
        finally:
            attacker.kill()
            attacker.wait(10)
    finally:
        group.close()
    assert said.startswith("refused"), said
    assert stat.S_IMODE(lock.stat().st_mode) & 0o007 == 0


def test_primacy_doctor_fails_on_a_lock_file_others_may_open_and_a_renamable_share(
    open_share: Path,
) -> None:
    parent = open_share.parent
    lock = ShareLayout(open_share).lock_file
    lock.touch()
    lock.chmod(0o644)
    parent.chmod(0o777)
    result = primacy("doctor", str(open_share))
    output = result.stdout + result.stderr
    assert result.returncode >= 1, output
    assert codes.LOCK_FILE_OPEN_TO_OTHERS in output and "mode 0644" in output
    assert codes.SHARE_RENAMABLE_BY_OTHERS in output and str(parent) in output
    lock.chmod(0o640)
    parent.chmod(0o755)
    result = primacy("doctor", str(open_share))
    output = result.stdout + result.stderr
    assert codes.LOCK_FILE_OPEN_TO_OTHERS not in output
    assert codes.SHARE_RENAMABLE_BY_OTHERS not in output


def test_primacy_doctor_flags_a_lock_no_primacy_node_holds(open_share: Path) -> None:
    """What the slaves could not say: the lock is held, and by nothing registered."""
    lock = ShareLayout(open_share).lock_file
    lock.touch()
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = primacy("doctor", str(open_share))
        status = primacy("status", "--share", str(open_share))
    finally:
        os.close(fd)
    assert "no live node is registered as master" in status.stdout, status.stdout
    output = result.stdout + result.stderr
    assert result.returncode >= 1, output
    assert codes.LOCK_HELD_BY_A_STRANGER in output
    assert codes.LOCK_HELD_BY_A_STRANGER not in primacy("doctor", str(open_share)).stdout
