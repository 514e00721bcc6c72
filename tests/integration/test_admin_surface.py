"""The admin surface on real supervisor processes: the bearer token, switchover, pause and
resume, over HTTP and through ``primacy cluster|switchover|pause|resume``."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.harness.checker import assert_ok, check
from tests.harness.cli import primacy
from tests.harness.emulated_hosts import EmulatedHosts
from tests.harness.group import Group, wait_until
from tests.harness.operator_http import TOKEN, admin, url
from tests.harness.traffic import StompGroup, Traffic

pytestmark = pytest.mark.slow


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "admin.token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def test_admin_endpoints_need_the_right_token(group: Group, token_file: Path) -> None:
    (node,) = group.start_many(1, "--admin-token-file", str(token_file))
    group.wait_for_master()
    assert admin(node, "POST", "/pause", token=None).status_code == 401
    assert admin(node, "POST", "/pause", token="wrong-token-of-some-length").status_code == 403
    response = httpx.post(url(node, "/pause"), headers={"Authorization": "Basic abc"})
    assert response.status_code == 401
    assert admin(node, "PUT", "/priority", json={"priority": "high"}).status_code == 200
    wait_until(
        lambda: httpx.get(url(node, "/status")).json()["priority"] == "high",
        5,
        "the priority to change",
    )
    assert admin(node, "PUT", "/priority", json={"priority": "sometimes"}).status_code == 409


def test_admin_endpoints_are_off_without_a_token_file(group: Group) -> None:
    (node,) = group.start_many(1)
    group.wait_for_master()
    assert admin(node, "POST", "/pause").status_code == 404
    assert admin(node, "POST", "/switchover").status_code == 404


def test_a_token_file_readable_by_others_is_refused(share: Path, token_file: Path) -> None:
    token_file.chmod(0o644)
    result = primacy(
        "run", "--node-id", "a", "--share", str(share), "--admin-token-file", str(token_file)
    )
    assert result.returncode == 2 and "chmod 600" in result.stderr


def test_switchover_hands_the_role_to_the_named_node(group: Group, token_file: Path) -> None:
    nodes = group.start_many(3, "--admin-token-file", str(token_file))
    old = group.wait_for_master()
    slaves = [node for node in nodes if node is not old]
    target = slaves[-1]
    wait_until(
        lambda: (
            len([m for m in httpx.get(url(old, "/cluster")).json()["members"] if m["live"]]) == 3
        ),
        10,
        "all nodes registered",
    )
    refused = admin(slaves[0], "POST", "/switchover", json={"to": target.node_id})
    assert refused.status_code == 409 and "not the serving master" in refused.json()["error"]
    answer = admin(old, "POST", "/switchover", json={"to": target.node_id})
    assert answer.status_code == 200, answer.text
    assert answer.json()["to"] == target.node_id
    assert group.wait_for_master(exclude={old.node_id}) is target
    assert old.alive() and old.status("/slave") == 200


def test_switchover_without_a_target_picks_the_best_slave(group: Group, token_file: Path) -> None:
    old = group.start("a", "--admin-token-file", str(token_file))
    group.wait_for_master()
    group.start("b", "--admin-token-file", str(token_file), "--priority", "normal")
    best = group.start("c", "--admin-token-file", str(token_file), "--priority", "highest")
    wait_until(
        lambda: (
            len(
                [
                    m
                    for m in httpx.get(url(old, "/cluster")).json()["members"]
                    if m["live"] and m["role"] == "slave"
                ]
            )
            == 2
        ),
        10,
        "two slaves",
    )
    assert admin(old, "POST", "/switchover").json()["to"] == "c"
    assert group.wait_for_master(exclude={"a"}) is best


@pytest.mark.fuse
@pytest.mark.parametrize("paused", [True, False], ids=["paused", "unpaused control"])
def test_pause_holds_roles_through_a_master_freeze(
    emulated_hosts: EmulatedHosts, token_file: Path, paused: bool
) -> None:
    """A plain SIGSTOP/SIGCONT changes no role even unpaused: the frozen master keeps its
    lock, and on resume its next lease check passes. What an unpaused group does react to
    is a lease check that was under way across the freeze: on resume it is older than the
    keepalive and the master demotes. The hung share makes that check certain to be under
    way; pause must hold the role through it (and the unpaused control must not)."""
    host_a, host_b = emulated_hosts(2, lease_s=60.0)  # the NFS lease outlasts the hang
    # A keepalive the emulated share (a Python daemon) keeps on a loaded machine: on the
    # default 250 ms a lease check starved of CPU once demoted the master before the hang,
    # which is not what this test is about.
    args = ("--admin-token-file", str(token_file), "--lock-keep-alive-period-ms", "1000")
    master = emulated_hosts.start_node(host_a, "a", *args)
    wait_until(master.is_master, 30, "a to serve")
    slave = emulated_hosts.start_node(host_b, "b", *args)
    wait_until(lambda: slave.status("/slave") == 200, 30, "b to be a slave")
    epoch = httpx.get(url(master, "/status")).json()["epoch"]
    if paused:
        assert admin(slave, "POST", "/pause").status_code == 200  # any node pauses the group
        wait_until(
            lambda: httpx.get(url(master, "/status")).json()["paused"], 5, "the pause to spread"
        )
    host_a.partition("hang")  # the master's next lease check hangs
    wait_until(lambda: master.status("/master") == 503, 10, "the master's claim to lapse")
    master.signal(signal.SIGSTOP)
    time.sleep(4.0)  # four keepalive periods: on resume the hung check is long overdue
    master.signal(signal.SIGCONT)
    deadline = time.monotonic() + 2.0  # the resumed loop looks at the overdue check
    while time.monotonic() < deadline:
        assert slave.status("/master") == 503  # the frozen master's lock is held throughout
        time.sleep(0.05)
    host_a.heal()
    nodes = (master, slave)
    wait_until(lambda: len([n for n in nodes if n.is_master()]) == 1, 15, "one master")
    (serving,) = [n for n in nodes if n.is_master()]
    serving_epoch = httpx.get(url(serving, "/status")).json()["epoch"]
    if paused:
        assert (serving, serving_epoch) == (master, epoch)
        assert "PRIMACY-1003" not in master.log()
        assert slave.status("/slave") == 200
    else:
        demoted = master.log().split("PRIMACY-1003", 1)[1].splitlines()[0]
        assert "did not finish within the keepalive period" in demoted
        assert serving_epoch == epoch + 1


def test_a_paused_group_does_not_fail_over_until_resumed(group: Group, token_file: Path) -> None:
    nodes = group.start_many(2, "--admin-token-file", str(token_file))
    master = group.wait_for_master()
    slave = next(node for node in nodes if node is not master)
    assert admin(slave, "POST", "/pause").status_code == 200
    wait_until(lambda: httpx.get(url(slave, "/status")).json()["paused"], 5, "the pause")
    master.signal(signal.SIGKILL)
    master.process.wait(10)
    deadline = time.monotonic() + 1.5  # fifteen poll intervals
    while time.monotonic() < deadline:
        assert slave.status("/master") == 503
        time.sleep(0.05)
    assert admin(slave, "POST", "/resume").status_code == 200
    wait_until(slave.is_master, 10, "the slave to take over once resumed")


def test_cli_cluster_switchover_pause_resume(group: Group, share: Path, token_file: Path) -> None:
    nodes = group.start_many(2, "--admin-token-file", str(token_file))
    old = group.wait_for_master()
    other = next(node for node in nodes if node is not old)
    wait_until(
        lambda: (
            len([m for m in httpx.get(url(old, "/cluster")).json()["members"] if m["live"]]) == 2
        ),
        10,
        "both nodes registered",
    )
    table = primacy("cluster", "--share", str(share))
    assert table.returncode == 0
    assert f"{old.node_id}" in table.stdout and "master" in table.stdout and "live" in table.stdout
    # The token goes only to named addresses: the slave alone is not enough.
    refused = primacy("switchover", "--url", url(other, ""), "--token-file", str(token_file))
    assert refused.returncode == 1 and f"--url http://127.0.0.1:{old.port}" in refused.stderr
    result = primacy(
        "switchover",
        "--url",
        url(other, ""),
        "--url",
        url(old, ""),
        "--token-file",
        str(token_file),
    )
    assert result.returncode == 0, result.stderr
    assert f"{other.node_id} is serving as master" in result.stdout
    paused = primacy("pause", "--url", url(old, ""), "--token-file", str(token_file))
    assert paused.returncode == 0 and "paused" in paused.stdout
    wait_until(lambda: httpx.get(url(other, "/status")).json()["paused"], 5, "the pause")
    assert primacy("resume", "--url", url(old, ""), "--token-file", str(token_file)).returncode == 0
    wrong = token_file.parent / "wrong.token"
    wrong.write_text("not-the-right-token-at-all")
    denied = primacy("pause", "--url", url(old, ""), "--token-file", str(wrong))
    assert denied.returncode == 1 and "403" in denied.stderr and "wrong token" in denied.stderr


def test_a_planted_registry_entry_never_gets_the_token(
    group: Group, share: Path, token_file: Path
) -> None:
    """Found by trying: a planted ``nodes/aaa.json`` (role master, fresh, an address of the
    planter's) received ``Authorization: Bearer <token>`` from ``primacy switchover``. The
    token now goes only to addresses the operator names: here a listener at the planted
    address must hear nothing at all, whatever the operator's commands."""
    import json
    import socket
    import threading

    heard: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    heard.append(conn.recv(65536))
                except OSError:
                    heard.append(b"")

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    try:
        nodes = group.start_many(2, "--admin-token-file", str(token_file))
        old = group.wait_for_master()
        other = next(node for node in nodes if node is not old)
        planted = {
            "node_id": "aaa", "host": "elsewhere", "pid": 1,
            "http": f"127.0.0.1:{listener.getsockname()[1]}", "priority": "highest",
            "role": "master", "epoch": 99, "updated_unix_s": time.time() + 3600,
        }  # fmt: skip
        (share / "nodes" / "aaa.json").write_text(json.dumps(planted))
        # Within the clock-skew allowance: live for the next 40 s, as a real entry would be.
        fresh = {**planted, "node_id": "aab", "updated_unix_s": time.time() + 30}
        (share / "nodes" / "aab.json").write_text(json.dumps(fresh))
        wait_until(
            lambda: any(
                m["node_id"] == "aab" for m in httpx.get(url(other, "/cluster")).json()["members"]
            ),
            10,
            "the planted entry to be read",
        )
        refused = primacy("switchover", "--url", url(other, ""), "--token-file", str(token_file))
        assert refused.returncode == 1 and "lists 2 masters" in refused.stderr, refused.stderr
        for args in (
            ("switchover", "--url", url(other, "")),
            ("switchover", "--url", url(other, ""), "--url", url(old, ""), "--to", "aaa"),
            ("pause", "--url", url(other, "")),
            ("resume", "--url", url(other, "")),
        ):
            primacy(*args, "--token-file", str(token_file))
        members = httpx.get(url(old, "/cluster")).json()["members"]
        assert not [m for m in members if m["node_id"] == "aaa" and m["live"]]  # from the future
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    assert heard == [], heard


def test_switchover_right_after_a_takeover_waits_for_the_nodes_view(
    group: Group, token_file: Path
) -> None:
    # A node's /cluster is refreshed from the share every registry_refresh_ms: asked
    # right after the takeover, the other node does not list the master yet, and the
    # CLI used to give up at once with "no live master is registered".
    nodes = group.start_many(
        2, "--admin-token-file", str(token_file), "--registry-refresh-ms", "2000"
    )
    old = group.wait_for_master()
    other = next(node for node in nodes if node is not old)
    result = primacy(
        "switchover",
        "--url",
        url(other, ""),
        "--url",
        url(old, ""),
        "--token-file",
        str(token_file),
    )
    assert result.returncode == 0, result.stderr
    assert f"{other.node_id} is serving as master" in result.stdout


def test_switchover_under_producer_load_loses_no_acknowledged_message(
    group: Group, share: Path, token_file: Path
) -> None:
    stomp = StompGroup(group.start, 2, "--admin-token-file", str(token_file))
    old = group.wait_for_master(timeout_s=30)
    wait_until(
        lambda: (
            len([m for m in httpx.get(url(old, "/cluster")).json()["members"] if m["live"]]) == 2
        ),
        10,
        "both nodes registered",
    )
    with Traffic(stomp.url, producers=2) as traffic:
        assert traffic.wait_for_acknowledged(25, 30), "the old master acknowledged nothing"
        answer = admin(old, "POST", "/switchover")
        assert answer.status_code == 200, answer.text
        new = group.wait_for_master(timeout_s=30, exclude={old.node_id})
        assert traffic.wait_for_acknowledged(25, 30), "the new master acknowledged nothing"
    assert new.node_id == answer.json()["to"]
    assert_ok(check(traffic, share))
    assert len(traffic.acknowledged) >= 50
