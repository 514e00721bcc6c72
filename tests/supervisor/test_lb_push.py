"""The push to HAProxy against a real Debian ``haproxy`` on loopback: a serving node's server
up and the backend's others down, a stopped node's down, over TCP and unix sockets; an
unreachable or refusing HAProxy retried, logged with its code, and never waited for."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from primacy.supervisor import codes
from primacy.supervisor.config import ConfigError, NodeConfig, load_config
from primacy.supervisor.shell.haproxy_api import commands
from primacy.supervisor.shell.lb_push import LoadBalancerPush
from tests.harness.group import free_port, wait_until
from tests.harness.haproxy import HAPROXY, Haproxy

BACKEND = "primacy_stomp"
# No health checks here: what HAProxy shows is what the pushes made it (the checks, the
# backstop, are in tests/integration/test_haproxy_push.py with real nodes).
BACKEND_CONFIG = f"""
backend {BACKEND}
    mode tcp
    timeout connect 100ms
    timeout server 1h
    server node-a 127.0.0.1:{{a}}
    server node-b 127.0.0.1:{{b}}
    server node-c 127.0.0.1:{{c}}
"""


def _backend_config() -> str:
    return BACKEND_CONFIG.format(a=free_port(), b=free_port(), c=free_port())


@pytest.fixture
def haproxy(tmp_path: Path) -> Iterator[Haproxy]:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    proxy = Haproxy(tmp_path, _backend_config())
    try:
        yield proxy
    finally:
        proxy.stop()


def _push(
    tmp_path: Path,
    node_id: str,
    address: str,
    serving_now: Callable[[], bool] = lambda: True,
    **keys: object,
) -> LoadBalancerPush:
    config = NodeConfig(node_id=node_id, share=tmp_path, haproxy_runtime_api=address, **keys)
    push = LoadBalancerPush(config, serving_now)
    push.start()
    return push


@pytest.mark.parametrize("socket_kind", ["tcp", "unix"])
def test_a_serving_node_is_the_only_server_up_and_a_stopped_one_is_down(
    tmp_path: Path, haproxy: Haproxy, socket_kind: str
) -> None:
    assert haproxy.ready(BACKEND) == {"node-a", "node-b", "node-c"}  # HAProxy's start
    address = haproxy.tcp_address if socket_kind == "tcp" else haproxy.unix_address
    push = _push(tmp_path, "node-b", address)
    try:
        push.follow(True, True)
        wait_until(lambda: haproxy.ready(BACKEND) == {"node-b"}, 10, "node-b alone up")
        push.follow(False, False)
        wait_until(lambda: haproxy.ready(BACKEND) == set(), 10, "node-b down")
    finally:
        push.close(5)
    changes = [
        line.split(" : ", 1)[1] for line in haproxy.log().splitlines() if line.startswith("[")
    ]
    changes = [line.split(".", 1)[0] for line in changes if line.startswith("Server")]
    assert changes == [  # in HAProxy's own words; b was up from its start
        f"Server {BACKEND}/node-a is DOWN, changed from CLI",
        f"Server {BACKEND}/node-c is DOWN, changed from CLI",
        f"Server {BACKEND}/node-b is DOWN, changed from CLI",
    ]


def test_no_up_is_sent_once_the_claim_lapsed_only_the_down_that_follows(
    tmp_path: Path, haproxy: Haproxy
) -> None:
    push = _push(tmp_path, "node-b", haproxy.tcp_address, serving_now=lambda: False)
    try:
        push.follow(True, True)  # asked while serving; the claim lapsed before the thread sent it
        push.follow(False, False)
        wait_until(lambda: "node-b" not in haproxy.ready(BACKEND), 10, "node-b down")
    finally:
        push.close(5)
    assert haproxy.ready(BACKEND) == {"node-a", "node-c"}  # no "others down" went either


def test_a_claim_that_lapses_while_still_master_is_left_to_the_checks(
    tmp_path: Path, haproxy: Haproxy
) -> None:
    push = _push(tmp_path, "node-b", haproxy.tcp_address)
    try:
        push.follow(True, True)
        wait_until(lambda: haproxy.ready(BACKEND) == {"node-b"}, 10, "node-b alone up")
        push.follow(False, True)  # /master says 503 for a moment: a late lease check
    finally:
        push.close(5)  # sends what is pending first
    assert haproxy.ready(BACKEND) == {"node-b"}


def test_the_server_name_may_differ_from_the_node_id(tmp_path: Path, haproxy: Haproxy) -> None:
    push = _push(tmp_path, "orders-2", haproxy.tcp_address, haproxy_server="node-c")
    try:
        push.follow(True, True)
        wait_until(lambda: haproxy.ready(BACKEND) == {"node-c"}, 10, "node-c alone up")
    finally:
        push.close(5)


def test_an_unreachable_haproxy_is_retried_until_it_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    caplog.set_level(logging.INFO, "primacy.node")
    socket_path = tmp_path / "haproxy-admin.sock"
    push = _push(tmp_path, "node-a", f"unix:{socket_path}", haproxy_timeout_ms=200)
    proxy: Haproxy | None = None
    try:
        push.follow(True, True)  # returns at once: nothing waits for a load balancer
        wait_until(lambda: codes.LB_UNREACHABLE in caplog.text, 10, "the failure logged")
        proxy = Haproxy(tmp_path, _backend_config())  # its socket appears where the push tries
        wait_until(lambda: proxy.ready(BACKEND) == {"node-a"}, 10, "node-a alone up")
        assert "(reached again)" in caplog.text
        assert caplog.text.count(codes.LB_UNREACHABLE) == 1  # once per failure, not per retry
    finally:
        push.close(5)
        if proxy is not None:
            proxy.stop()


def test_a_server_haproxy_does_not_know_is_refused_with_its_code(
    tmp_path: Path, haproxy: Haproxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "primacy.node")
    push = _push(tmp_path, "node-z", haproxy.tcp_address)
    try:
        push.follow(True, True)
        wait_until(lambda: codes.LB_REFUSED in caplog.text, 10, "the refusal logged")
    finally:
        push.close(5)
    assert "No such server" in caplog.text
    assert codes.LB_TOLD not in caplog.text


def test_a_socket_not_at_level_admin_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    caplog.set_level(logging.INFO, "primacy.node")
    user_port = free_port()
    proxy = Haproxy(
        tmp_path, _backend_config(), f"    stats socket ipv4@127.0.0.1:{user_port} level user\n"
    )
    push = _push(tmp_path, "node-a", f"127.0.0.1:{user_port}")
    try:
        push.follow(True, True)
        wait_until(lambda: codes.LB_REFUSED in caplog.text, 10, "the refusal logged")
        assert proxy.ready(BACKEND) == {"node-a", "node-b", "node-c"}  # nothing changed
    finally:
        push.close(5)
        proxy.stop()


@pytest.mark.parametrize(
    "address", ["haproxy:", "http://lb:9999", "lb:99999", "unix:relative/path", "lb:1,"]
)
def test_a_runtime_api_address_that_is_none_is_refused_naming_the_key(
    tmp_path: Path, address: str
) -> None:
    with pytest.raises(ConfigError, match="haproxy_runtime_api"):
        load_config(None, {"node_id": "a", "share": tmp_path, "haproxy_runtime_api": address})


def test_several_runtime_apis_are_read_in_order(tmp_path: Path) -> None:
    config = load_config(
        None,
        {
            "node_id": "a",
            "share": tmp_path,
            "haproxy_runtime_api": "unix:/run/haproxy/admin.sock, 10.0.0.5:9999,[::1]:9999",
        },
    )
    assert config.haproxy_runtime_apis() == [
        "unix:/run/haproxy/admin.sock",
        "10.0.0.5:9999",
        "[::1]:9999",
    ]


def test_the_backends_other_servers_go_down_before_this_node_goes_up() -> None:
    assert commands("b", "node-b", True, ["node-a", "node-b", "node-c"]) == [
        "set server b/node-a health down",
        "set server b/node-c health down",
        "set server b/node-b health up",
    ]
    assert commands("b", "node-b", False, ["node-a", "node-b"]) == [
        "set server b/node-b health down"
    ]
