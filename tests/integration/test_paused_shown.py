"""Issue 45 item 5: a paused group says so wherever a role is shown.

After `primacy pause` neither `status --share`, `status --url`, `cluster` nor `status --json`
said so, and a pause forgotten after maintenance silently turns failover off. Real nodes, the
real command line; the alert on ``primacy_paused`` is in monitoring/alerts_test.yml.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.harness.cli import primacy
from tests.harness.group import Group, NodeProcess, wait_until
from tests.harness.operator_http import TOKEN, url

pytestmark = pytest.mark.slow


def _everything_shown(share: Path, master: NodeProcess) -> dict[str, str]:
    """What each command prints about the group, by command."""
    commands = {
        "status --share": ("status", "--share", str(share)),
        "status --share --json": ("status", "--share", str(share), "--json"),
        "status --url": ("status", "--url", url(master, "")),
        "status --url --json": ("status", "--url", url(master, ""), "--json"),
        "cluster": ("cluster", "--share", str(share)),
        "cluster --json": ("cluster", "--share", str(share), "--json"),
    }
    shown = {}
    for name, argv in commands.items():
        result = primacy(*argv, timeout_s=30)
        assert result.returncode == 0, (name, result.stderr)
        shown[name] = result.stdout
    return shown


def test_pause_is_shown_by_status_and_cluster_until_resumed(
    group: Group, share: Path, tmp_path: Path
) -> None:
    token_file = tmp_path / "admin.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    master, slave = group.start_many(2, "--admin-token-file", str(token_file))
    group.wait_for_master()
    master = next(node for node in (master, slave) if node.is_master())
    paused = primacy("pause", "--url", url(master, ""), "--token-file", str(token_file))
    assert paused.returncode == 0, paused.stderr
    wait_until(lambda: httpx.get(url(master, "/status")).json()["paused"], 10, "the node to see it")

    shown = _everything_shown(share, master)
    assert "group: PAUSED" in shown["status --share"]
    assert "master, paused" in shown["status --share"]
    assert "slave, paused" in shown["status --share"]
    assert json.loads(shown["status --share --json"])["paused"] is True
    assert ": master, group paused, epoch" in shown["status --url"]
    assert json.loads(shown["status --url --json"])["paused"] is True
    assert "group: PAUSED" in shown["cluster"]
    assert "master, paused" in shown["cluster"]
    assert {member["paused"] for member in json.loads(shown["cluster --json"])} == {True}

    resumed = primacy("resume", "--url", url(master, ""), "--token-file", str(token_file))
    assert resumed.returncode == 0, resumed.stderr
    wait_until(
        lambda: not httpx.get(url(master, "/status")).json()["paused"], 10, "the node to see it"
    )
    shown = _everything_shown(share, master)
    for name in ("status --share", "status --url", "cluster"):
        assert "paused" not in shown[name].lower(), shown[name]
    assert json.loads(shown["status --share --json"])["paused"] is False
    assert {member["paused"] for member in json.loads(shown["cluster --json"])} == {False}
