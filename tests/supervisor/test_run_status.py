"""What `primacy run` was told and found at start, as a real node's `/status` and broker show it.

The journal's settings from the TOML file and flags, the share check's verdict,
and `since`. Nodes are real supervisor processes, killed by pid at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from primacy.cli.main import share_check_for_status
from primacy.nfs_profiles.doctor import check_for_run
from primacy.store.config import MIB
from tests.broker.stomppy import StompPy
from tests.harness.cli import PRIMACY, primacy
from tests.harness.group import Group, NodeProcess, free_port, wait_until
from tests.nfs_profiles.mountinfo_samples import BASE, NFS3
from tests.supervisor.private_mount import private_mount_unavailable_reason

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operator-guide.md"


def documented_status_fields() -> set[str]:
    """The field names in the first column of the operator guide's /status table."""
    text = GUIDE.read_text()
    table = text[text.index("`GET /status` answers 200") :].split("\n\n")[1]
    fields: set[str] = set()
    for row in table.splitlines()[2:]:
        first_column = row.split("|")[1]
        fields.update(part.strip().strip("`") for part in first_column.split(","))
    return fields


def status_of(node: NodeProcess) -> dict[str, Any]:
    response = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=5)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def pending(node: NodeProcess) -> int:
    count: int = status_of(node)["journal"]["pending_messages"]
    return count


@pytest.mark.slow
def test_journal_settings_from_the_file_and_flags_reach_the_running_node(
    group: Group, tmp_path: Path
) -> None:
    config = tmp_path / "node.toml"
    config.write_text(
        "segment_max_bytes = 16384\n"
        "max_message_size = 2048\n"  # the flag below wins
        'retention_max_age_s = "none"\n'
        "retention_max_bytes = 999999\n"  # the flag's "none" below wins
        "dedupe_window_messages = 5\n"
    )
    stomp_port = free_port()
    node = group.start(
        "n1",
        "--config",
        str(config),
        "--stomp",
        f"127.0.0.1:{stomp_port}",
        "--max-message-size",
        str(7 * MIB),
        "--retention-max-bytes",
        "none",
    )
    group.wait_for_master(timeout_s=20)
    assert status_of(node)["journal"]["settings"] == {
        "segment_max_bytes": 16384,
        "max_message_size": 7 * MIB,
        "retention_max_age_s": None,
        "retention_max_bytes": None,
        "dedupe_window_messages": 5,
    }

    client = StompPy(("127.0.0.1", stomp_port))
    try:
        # Above the 5 MiB default: stored only because the flag reached the journal
        # and the broker's frame limit follows it.
        assert client.send("/queue/big", b"x" * (6 * MIB), **{"message-id": "big-1"})
        # A record over max_message_size is refused, the broker says why.
        assert not client.send("/queue/big", b"x" * (7 * MIB + 100), **{"message-id": "big-2"})
        assert "PRIMACY-1507" in client.listener.errors[0].headers["message"]
    finally:
        client.close()

    client = StompPy(("127.0.0.1", stomp_port))
    try:
        # dedupe_window_messages = 5: once consumed, an id 7 distinct ids back is
        # stored again, one still in the window is not; a consumer sees which.
        # (A resend of an id whose first copy is still pending is dropped whatever
        # the window: tests/broker/test_dedupe_pending.py.)
        client.subscribe("/queue/d", "sub-d")
        for index in range(7):
            assert client.send("/queue/d", f"m{index}", **{"message-id": f"m{index}"})
        bodies = [client.message(timeout_s=10).body for _ in range(7)]
        assert sorted(bodies) == [f"m{index}" for index in range(7)]
        assert client.send("/queue/d", "m6 again", **{"message-id": "m6"})  # dropped
        assert client.send("/queue/d", "m0 again", **{"message-id": "m0"})  # stored again
        assert client.message(timeout_s=10).body == "m0 again"
        assert client.no_message(wait_s=1.0), "a message was delivered twice"
        # segment_max_bytes = 16384: 10 KiB messages each need a new segment.
        for index in range(3):
            assert client.send("/queue/s", b"y" * 10240, **{"message-id": f"s{index}"})
    finally:
        client.close()
    segments = sorted((group.share / "journal").glob("*.seg"))
    assert len(segments) >= 4, segments  # the 6 MiB one, then one per 10 KiB message
    assert all(path.stat().st_size <= 16384 for path in segments[-3:])


def _doctor(share: Path) -> dict[str, Any]:
    done = primacy("doctor", str(share), "--json", "--no-round-trips")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.slow
def test_status_carries_the_share_check_and_since(group: Group) -> None:
    started = time.time()
    node = group.start("n1")
    group.wait_for_master(timeout_s=20)
    status = status_of(node)

    # The verdict is the one `primacy doctor` gives the same share.
    doctor = _doctor(group.share)
    problems = [f for f in doctor["findings"] if f["severity"] != "ok"]
    check = status["share_check"]
    assert check["verdict"] == {"ok": "fine", "warning": "warnings"}[doctor["verdict"]]
    assert check["profile"] == doctor["profile"]["name"]
    assert check["fs_type"] == doctor["mount"]["fs_type"]
    assert check["mount_point"] == doctor["mount"]["mount_point"]
    assert [f["code"] for f in check["findings"]] == [f["code"] for f in problems]
    assert check["summary"].startswith(problems[0]["code"] if problems else "the share")

    # `since`: when the node took its current role, as ISO 8601 with a zone, and
    # the same instant as since_unix_s (kept for existing readers).
    since = datetime.fromisoformat(status["since"])
    assert since.utcoffset() is not None
    assert abs(since.timestamp() - status["since_unix_s"]) < 0.001
    assert started - 1 <= since.timestamp() <= time.time()
    assert status["role"] == "master"

    # The operator guide lists exactly the fields a node sends.
    assert documented_status_fields() == set(status)


@pytest.mark.slow
def test_status_shows_the_warnings_of_a_tmpfs_share(tmp_path: Path) -> None:
    why_not = private_mount_unavailable_reason()
    if why_not is not None:
        pytest.skip(f"cannot mount a tmpfs in a private mount namespace here: {why_not}")
    share = tmp_path / "share"
    share.mkdir()
    port = free_port()
    log_path = tmp_path / "node.log"
    # The tmpfs exists only in the node's own mount namespace and goes with it.
    # mode=0750: a tmpfs root is 1777 by default, which the doctor flags too (PRIMACY-3014).
    script = 'mount -t tmpfs -o mode=0750 primacy-tmpfs "$0" && exec "$@"'
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(share)]
    command += [*PRIMACY, "run", "--node-id", "t1"]
    command += ["--share", str(share), "--http", f"127.0.0.1:{port}"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    node = NodeProcess("t1", port, process, log_path)
    try:
        wait_until(lambda: node.status("/master") == 200, 20, "the tmpfs node to serve")
        check = status_of(node)["share_check"]
        assert check["verdict"] == "warnings"
        assert check["fs_type"] == "tmpfs" and check["profile"] == "local"
        assert check["mount_point"] == str(share)
        assert [f["code"] for f in check["findings"]] == ["PRIMACY-3007"]
        assert check["findings"][0]["severity"] == "warning"
        assert check["findings"][0]["summary"].startswith("tmpfs: ")
        assert check["summary"].startswith("PRIMACY-3007 ")
        assert "PRIMACY-3022" in node.log()  # the same verdict, logged at start
        assert os.listdir(share) == []  # the node's files are on the tmpfs, not the directory
    finally:
        node.signal(9)
        process.wait(timeout=10)


def test_a_forced_refused_share_is_shown_as_such(tmp_path: Path) -> None:
    # A refused mount cannot be made here (no NFS server); the doctor reads a
    # recorded NFSv3 mount table line for this directory instead.
    mountinfo = tmp_path / "mountinfo"
    share = tmp_path / "share"
    share.mkdir()
    mountinfo.write_text(BASE + NFS3.replace("/srv/primacy", str(share)))
    check = share_check_for_status(check_for_run(share, mountinfo_path=mountinfo))
    assert check.verdict == "refused_but_forced"
    assert check.profile == "nfs4" and check.fs_type == "nfs"
    codes = [finding.code for finding in check.findings]
    assert "PRIMACY-3004" in codes
    refused = next(f for f in check.findings if f.code == "PRIMACY-3004")
    assert refused.severity == "refused" and refused.summary.startswith("vers=3: ")
    assert check.summary.startswith("PRIMACY-3004 ")


@pytest.mark.slow
def test_an_edited_key_that_needs_a_restart_waits_for_it(group: Group, tmp_path: Path) -> None:
    # PRIMACY-1013 says the key takes effect after a restart; a node promoted without
    # one must keep the journal settings it started with, and take the live key at once.
    first = group.start("n1")
    group.wait_for_master(timeout_s=20)
    config = tmp_path / "n2.toml"
    config.write_text('priority = "normal"\ndedupe_window_messages = 5\n')
    second = group.start("n2", "--config", str(config))
    wait_until(lambda: second.status("/slave") == 200, 20, "n2 to be a slave")
    config.write_text('priority = "high"\ndedupe_window_messages = 9\n')
    wait_until(lambda: "PRIMACY-1013" in second.log(), 10, "n2 to read the edited file")
    assert "dedupe_window_messages" in second.log()
    wait_until(lambda: status_of(second)["priority"] == "high", 10, "the live key to apply")
    first.signal(signal.SIGKILL)
    wait_until(second.is_master, 20, "n2 to take over without a restart")
    assert status_of(second)["journal"]["settings"]["dedupe_window_messages"] == 5
