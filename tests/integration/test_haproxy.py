"""The operator guide's load balancer examples, run for real: HAProxy before the STOMP ports
health-checking /master (clients follow the master), and keepalived's VRRP check."""

from __future__ import annotations

import pwd
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.cli.localgroup import free_port, http_status
from primacy.client.consumer import Consumer
from primacy.client.producer import Producer
from tests.harness.group import Group, wait_until
from tests.harness.guide_examples import guide_example, haproxy_config, substitute
from tests.harness.haproxy import stop_process

pytestmark = pytest.mark.slow
HAPROXY = shutil.which("haproxy")
KEEPALIVED = shutil.which("keepalived")
QUEUE = "/queue/through-haproxy"


@pytest.fixture
def haproxy(tmp_path: Path) -> Iterator[tuple[Path, int, int]]:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    yield tmp_path / "haproxy.cfg", free_port(), free_port()


def test_a_client_through_haproxy_keeps_working_across_a_master_kill(
    group: Group, haproxy: tuple[Path, int, int]
) -> None:
    config_path, front_port, stats_port = haproxy
    stomp_ports = {"node-a": free_port(), "node-b": free_port()}
    for node_id, port in stomp_ports.items():
        group.start(node_id, "--stomp", f"127.0.0.1:{port}")
    master = group.wait_for_master(timeout_s=30)
    backends = {n: (stomp_ports[n], group.nodes[n].port) for n in stomp_ports}
    config_path.write_text(haproxy_config(front_port, backends, stats_port))
    assert HAPROXY is not None
    proxy = subprocess.Popen(
        [HAPROXY, "-db", "-f", str(config_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: http_status(stats_port, "/") == 200, 15, "HAProxy to see the master")
        url = f"tcp://127.0.0.1:{front_port}"
        producer = Producer(url, window=1, receipt_timeout_s=3.0)
        sent = [producer.send(QUEUE, f"before {n}".encode()) for n in range(20)]
        master.signal(signal.SIGKILL)
        master.process.wait(10)
        sent += [producer.send(QUEUE, f"after {n}".encode()) for n in range(20)]
        producer.flush()
        assert producer.failover.reconnects >= 1  # the client did lose its connection
        producer.close()

        consumer = Consumer(url, QUEUE, receipt_timeout_s=3.0)
        seen: set[str] = set()
        deadline = time.monotonic() + 30
        while not set(sent) <= seen and time.monotonic() < deadline:
            message = consumer.receive(0.5)
            if message is not None:
                seen.add(message.message_id)
                consumer.ack(message)
        consumer.close()
        assert set(sent) <= seen
    finally:
        stop_process(proxy)


def test_the_guides_haproxy_example_passes_haproxy_check(tmp_path: Path) -> None:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    config = tmp_path / "haproxy.cfg"
    config.write_text(
        haproxy_config(free_port(), {"node-a": (61613, 8008), "node-b": (61614, 8009)}, free_port())
    )
    result = subprocess.run(
        [HAPROXY, "-c", "-f", str(config)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_guides_haproxy_example_draws_no_haproxy_warning(tmp_path: Path) -> None:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    config = tmp_path / "haproxy.cfg"
    config.write_text(guide_example("Load balancer: HAProxy"))
    result = subprocess.run(
        [HAPROXY, "-c", "-f", str(config)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0 and "WARNING" not in result.stderr, result.stderr


def keepalived_example(interface: str) -> str:
    return substitute(
        guide_example("Virtual IP: keepalived"), {"interface eth0": f"interface {interface}"}
    )


def keepalived_config_test(config: Path) -> subprocess.CompletedProcess[str]:
    """``keepalived -t``; in its own session: 2.2.7 (Debian 12) ends its config test with
    kill(0, SIGTERM), which would hit this test's process group (keepalived#2617, fixed in
    2.2.8), so there the exit code says nothing and the diagnostics on stderr decide."""
    assert KEEPALIVED is not None
    return subprocess.run(
        [KEEPALIVED, "--dont-fork", "--log-console", "-t", "-f", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
        start_new_session=True,
    )


def _keepalived_verdict(result: subprocess.CompletedProcess[str]) -> tuple[bool, str]:
    version = subprocess.run([KEEPALIVED or "", "--version"], capture_output=True, text=True)
    killed_by_its_own_bug = "v2.2.7 " in version.stderr + version.stdout and result.returncode in (
        -signal.SIGTERM,
        128 + signal.SIGTERM,
    )
    clean = result.stderr.strip() == "" and result.stdout.strip() == ""
    return (result.returncode == 0 or killed_by_its_own_bug) and clean, result.stderr


@pytest.fixture
def keepalived_interface() -> str:
    if KEEPALIVED is None:
        pytest.skip("keepalived is not installed (as root: apt-get install keepalived)")
    names = [name for _, name in socket.if_nameindex()]
    return "eth0" if "eth0" in names else next(n for n in names if n != "lo")


def test_the_guides_keepalived_example_passes_keepalived_config_test(
    tmp_path: Path, keepalived_interface: str
) -> None:
    config = tmp_path / "keepalived.conf"
    config.write_text(keepalived_example(keepalived_interface))
    ok, diagnostics = _keepalived_verdict(keepalived_config_test(config))
    assert ok, diagnostics
    # The check above can fail: a misspelt keyword is reported.
    config.write_text(config.read_text().replace("virtual_router_id", "virtual_router_idd"))
    ok, diagnostics = _keepalived_verdict(keepalived_config_test(config))
    assert not ok and "virtual_router_idd" in diagnostics


def test_the_guides_keepalived_check_script_is_in_place_and_passes_only_on_the_master(
    group: Group, keepalived_interface: str
) -> None:
    example = keepalived_example(keepalived_interface)
    (script,) = re.findall(r'^\s*script "([^"]+)"$', example, re.M)
    (script_user,) = re.findall(r"^\s*script_user (\S+)$", example, re.M)
    command = shlex.split(script)
    # What enable_script_security demands (keepalived 2.2.7 cannot check it under -t, see
    # above): the program exists, is executable, and only root can change it.
    program = Path(command[0])
    mode = program.stat()
    assert program.is_file() and mode.st_mode & stat.S_IXOTH, program
    assert mode.st_uid == 0 and not mode.st_mode & (stat.S_IWGRP | stat.S_IWOTH), program
    pwd.getpwnam(script_user)  # the user the check runs as exists
    nodes = group.start_many(2)
    master = group.wait_for_master()
    for node in nodes:
        on_node = [part.replace(":8008/", f":{node.port}/") for part in command]
        assert on_node != command
        result = subprocess.run(on_node, capture_output=True, timeout=30)
        assert (result.returncode == 0) == (node is master), (node.node_id, result)
