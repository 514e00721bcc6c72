"""The operator surface on real supervisor processes: status codes, metrics, the cluster view,
readiness and live configuration. The admin side (token, switchover, pause) is in
test_admin_surface.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from primacy.share.layout import LOCK_FILE_NAME
from tests.harness.group import Group, wait_until
from tests.harness.operator_http import url

pytestmark = pytest.mark.slow

GET_ONLY = {"/metrics"}  # every other status endpoint answers HEAD too


def test_every_endpoint_answers_master_and_slave_apart(group: Group) -> None:
    nodes = group.start_many(2)
    master = group.wait_for_master()
    slave = next(node for node in nodes if node is not master)
    wait_until(lambda: slave.status("/readiness") == 200, 10, "the slave to be ready")
    expected = {
        "/master": (200, 503),
        "/primary": (200, 503),
        "/slave": (503, 200),
        "/standby": (503, 200),
        "/replica": (503, 200),
        "/health": (200, 200),
        "/liveness": (200, 200),
        "/readiness": (200, 200),
        "/status": (200, 200),
        "/cluster": (200, 200),
        "/metrics": (200, 200),
    }
    for path, (on_master, on_slave) in expected.items():
        assert (master.status(path), slave.status(path)) == (on_master, on_slave), path
        # HEAD answers as GET does, except where api/app.py offers GET only.
        heads = (httpx.head(url(master, path)), httpx.head(url(slave, path)))
        if path in GET_ONLY:
            assert tuple(h.status_code for h in heads) == (405, 405), path
        else:
            assert tuple(h.status_code for h in heads) == (on_master, on_slave), path
            assert all(h.content == b"" for h in heads), path
    status = httpx.get(url(master, "/status")).json()
    for key in (
        "node",
        "role",
        "epoch",
        "since_unix_s",
        "priority",
        "last_keepalive_unix_s",
        "last_keepalive_duration_s",
        "lock_holder",
        "journal",
        "version",
        "live",
    ):
        assert key in status, key
    assert status["lock_holder"]["node_id"] == master.node_id


def test_cluster_lists_every_node_from_the_share(group: Group) -> None:
    nodes = group.start_many(3)
    master = group.wait_for_master()

    def all_listed() -> bool:
        members = httpx.get(url(nodes[0], "/cluster")).json()["members"]
        return {m["node_id"]: m["role"] for m in members if m["live"]} == {
            n.node_id: ("master" if n is master else "slave") for n in nodes
        }

    wait_until(all_listed, 10, "every node listed with its role")


def test_metrics_parse_and_carry_the_node_figures(group: Group) -> None:
    (node,) = group.start_many(1)
    group.wait_for_master()

    def keepalives_counted() -> bool:
        families = text_string_to_metric_families(httpx.get(url(node, "/metrics")).text)
        return any(
            sample.name == "primacy_keepalive_duration_seconds_count" and sample.value >= 2
            for family in families
            for sample in family.samples
        )

    wait_until(keepalives_counted, 10, "two lease checks in /metrics")
    text = httpx.get(url(node, "/metrics")).text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    for name in (
        "primacy_role",
        "primacy_epoch",
        "primacy_serving",
        "primacy_role_changes",
        "primacy_keepalive_duration_seconds",
        "primacy_lock_attempts",
        "primacy_journal_commit_latency_seconds",
        "primacy_journal_batch_records",
        "primacy_messages_in",
        "primacy_messages_out",
        "primacy_fenced_writes",
    ):
        assert name in families, name
    role = {s.labels["role"]: s.value for s in families["primacy_role"].samples}
    assert role["master"] == 1.0 and role["slave"] == 0.0
    assert families["primacy_epoch"].samples[0].value == 1.0
    counts = [
        s
        for s in families["primacy_keepalive_duration_seconds"].samples
        if s.name.endswith("_count")
    ]
    assert counts[0].value >= 2
    commits = [
        s
        for s in families["primacy_journal_commit_latency_seconds"].samples
        if s.name.endswith("_count")
    ]
    assert commits[0].value >= 1  # the role change (the fence is written before metrics attach)


LEASE_HOLDER = textwrap.dedent("""
    import fcntl, os, signal, sys
    signal.signal(signal.SIGIO, signal.SIG_IGN)  # told of the opener; we release when asked
    fd = os.open(sys.argv[1], os.O_RDONLY)
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    print("held", flush=True)
    sys.stdin.readline()
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    print("released", flush=True)
""")


def test_readiness_is_503_until_the_first_lock_attempt_is_done(group: Group, share: Path) -> None:
    # A read lease (fcntl F_SETLEASE) on the lock file makes the node's first lock attempt,
    # which opens the file for writing, wait until the lease is released (up to
    # /proc/sys/fs/lease-break-time, 45 s by default): a first attempt that cannot finish.
    lock_file = share / LOCK_FILE_NAME
    lock_file.write_text("")
    holder = subprocess.Popen(
        [sys.executable, "-c", LEASE_HOLDER, str(lock_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdin is not None and holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        node = group.start("late")
        wait_until(lambda: node.status("/health") == 200, 20, "the node to answer")
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert node.status("/readiness") == 503
            time.sleep(0.05)
        status = httpx.get(url(node, "/status")).json()
        assert (status["role"], status["first_lock_attempt_done"]) == ("starting", False)
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        wait_until(lambda: node.status("/readiness") == 200, 15, "the node to be ready")
        assert node.is_master()
    finally:
        holder.kill()
        holder.wait(10)


def test_config_file_edits_apply_at_run_time_and_bad_edits_are_refused(
    group: Group, tmp_path: Path
) -> None:
    config = tmp_path / "node.toml"
    config.write_text('priority = "normal"\n')
    node = group.start("edited", "--config", str(config))
    group.wait_for_master()
    config.write_text('priority = "high"\nlock_keep_alive_period_ms = 400\n')
    wait_until(
        lambda: httpx.get(url(node, "/status")).json()["priority"] == "high",
        10,
        "the edited priority",
    )
    config.write_text('priority = "sometimes"\n')
    wait_until(lambda: "PRIMACY-2006" in node.log(), 10, "the bad edit to be refused")
    assert httpx.get(url(node, "/status")).json()["priority"] == "high"
    assert "PRIMACY-1016" in node.log()
    assert node.is_master()
    epoch_record = (group.share / "epochs" / "1").read_text()
    assert '"lock_keep_alive_period_ms": 400' in epoch_record
    assert os.path.exists(config)
