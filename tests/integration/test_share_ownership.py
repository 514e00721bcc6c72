"""Files another user left on the share (issue 45, item 3), on real nodes and a real user.

A node once started as root wrote its epoch and its segment ``root:root 0640``. On 173b3ec
the service user's node then claimed epoch after epoch (each claim worked: ``epochs/`` is
its own) and failed to open the journal each time, with no master and the doctor saying
ok. Now the node (run as ``nobody``, on a share ``nobody`` owns) claims nothing and says
why with PRIMACY-1030 in ``/status``, ``primacy status --url`` and the alert's metric; the
doctor, run as that user or as root for it (``--user``), names the files and the one fix;
once the fix the node printed is run, it serves.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from primacy.cli.localgroup import NodeProcess, free_port
from primacy.share.access import Identity
from primacy.share.layout import ShareLayout
from tests.harness.cli import primacy
from tests.harness.group import Group, wait_until

pytestmark = pytest.mark.slow

USER = "nobody"
# An interpreter another user may run (this virtualenv's may sit in root's home 0700), given
# this virtualenv's packages (primacy installed editable) by adding its site directory.
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
SITE = sysconfig.get_paths()["purelib"]
AS_USER = [
    str(SYSTEM_PYTHON),
    "-c",
    f"import site, sys; site.addsitedir({SITE!r}); "
    "from primacy.cli.main import main; sys.exit(main())",
]
FAST = ("--lock-acquire-sleep-interval-ms", "200", "--crash-loop-hold-off-ms", "1000")
CODE = "PRIMACY-1030"


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "running a node as another user (and writing the share as root) needs root"
    if SYSTEM_PYTHON is None:
        return "no system python3 another user may run"
    probe = subprocess.run(
        [*AS_USER, "--version"],
        user=USER,
        group=pwd.getpwnam(USER).pw_gid,
        extra_groups=[],
        capture_output=True,
    )
    if probe.returncode != 0:
        return f"{USER} cannot import this checkout's primacy from {SITE}: {probe.stderr[-300:]!r}"
    return None


def _as_user(*args: str) -> subprocess.CompletedProcess[str]:
    """``primacy ARGS`` run as the service user."""
    return subprocess.run(
        [*AS_USER, *args],
        user=USER,
        group=pwd.getpwnam(USER).pw_gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _start_as_user(node_id: str, share: Path, log_dir: Path) -> NodeProcess:
    port = free_port()
    log_path = log_dir / f"{node_id}-{port}.log"
    args = ["run", "--node-id", node_id, "--share", str(share), "--http", f"127.0.0.1:{port}"]
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            [*AS_USER, *args, *FAST],
            user=USER,
            group=pwd.getpwnam(USER).pw_gid,
            extra_groups=[],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return NodeProcess(node_id, port, process, log_path)


def _get(node: NodeProcess, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.port}{path}", timeout=5) as answer:
        return bytes(answer.read())


def _status(node: NodeProcess) -> dict[str, Any]:
    return dict(json.loads(_get(node, "/status")))


def _stop(node: NodeProcess) -> None:
    node.signal(signal.SIGTERM)
    node.process.wait(30)


@pytest.fixture
def user_share() -> Iterator[Path]:
    """A share the service user owns, in a directory it can reach (pytest's are 0700)."""
    base = Path(tempfile.mkdtemp(prefix="primacy-ownership-"))
    try:
        base.chmod(0o755)
        share = base / "share"
        share.mkdir(mode=0o750)
        entry = pwd.getpwnam(USER)
        os.chown(share, entry.pw_uid, entry.pw_gid)
        yield share
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def test_files_root_left_stop_the_node_cleanly_and_the_doctor_names_the_fix(
    user_share: Path, tmp_path: Path
) -> None:
    unavailable = _unavailable()
    if unavailable is not None:
        pytest.skip(unavailable)
    layout = ShareLayout(user_share)
    service = Identity.named(USER)
    nodes: list[NodeProcess] = []
    root_group = Group(share=user_share, log_dir=tmp_path, common_args=FAST)
    try:
        first = _start_as_user("a", user_share, tmp_path)
        nodes.append(first)
        wait_until(first.is_master, 30, "a to serve as the service user")
        _stop(first)

        # An operator starts a node by hand as root: its epoch and segment are root's, 0640.
        by_root = root_group.start("by-root")
        wait_until(by_root.is_master, 30, "the node run as root to serve")
        _stop(by_root)
        root_epoch = max(int(name) for name in os.listdir(layout.epochs) if name.isdigit())
        root_files = [layout.epoch_file(root_epoch)] + [
            path for path in layout.journal.iterdir() if f"{root_epoch:010d}" in path.name
        ]
        assert len(root_files) >= 2, root_files
        for path in root_files:
            info = path.stat()
            assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o640), path

        again = _start_as_user("a", user_share, tmp_path)
        nodes.append(again)
        wait_until(lambda: again.status("/health") == 200, 30, "a to answer /health")
        time.sleep(6)  # on 173b3ec: a claim, a failed journal, a hold-off: epochs burn
        epochs_now = sorted(int(name) for name in os.listdir(layout.epochs) if name.isdigit())
        assert max(epochs_now) == root_epoch, f"epochs claimed: {epochs_now}\n{again.log()}"

        status = _status(again)
        assert status["role"] == "slave" and status["epoch"] is None
        why = status["share_unusable"]
        assert CODE in why and str(layout.epoch_file(root_epoch)) in why, why
        assert again.status("/slave") == 503  # no standby that could take over
        assert b"primacy_share_unusable 1.0" in _get(again, "/metrics")
        shown = primacy("status", "--url", f"http://127.0.0.1:{again.port}")
        # No node serves as master here: status says so with 6 (EXIT_NO_MASTER).
        assert shown.returncode == 6 and CODE in shown.stdout, shown

        fix_one = f"chown {service.owner} {layout.epoch_file(root_epoch)} && chmod 0640 "
        for doctor in (
            _as_user("doctor", str(user_share), "--no-round-trips"),
            primacy("doctor", str(user_share), "--no-round-trips", "--user", USER),
        ):
            assert doctor.returncode == 2, doctor
            assert "PRIMACY-3070" in doctor.stdout, doctor.stdout
            for path in root_files:
                assert str(path) in doctor.stdout, doctor.stdout
            assert fix_one in doctor.stdout, doctor.stdout
            assert "verdict: ok" not in doctor.stdout

        fix = why.split("Fix: ", 1)[1].split(" (primacy doctor", 1)[0]
        assert fix.startswith(f"chown -R {service.owner} {user_share} && chmod -R "), fix
        subprocess.run(["sh", "-c", fix], check=True)
        wait_until(again.is_master, 30, "a to serve once the share is fixed")
        assert _status(again)["share_unusable"] is None
        assert b"primacy_share_unusable 0.0" in _get(again, "/metrics")
        cured = primacy("doctor", str(user_share), "--no-round-trips", "--user", USER)
        assert "PRIMACY-3070" not in cured.stdout, cured.stdout
    finally:
        root_group.close()
        for node in nodes:
            if node.alive():
                node.signal(signal.SIGKILL)
                node.process.wait(10)
        for node in nodes:
            sys.stdout.write(f"--- {node.node_id} ---\n{node.log()[-3000:]}\n")
