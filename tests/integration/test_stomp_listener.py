"""Only a serving master listens on ``--stomp``; demotion closes the listener and every connection.

Real supervisor processes with the built-in broker, and the third-party
stomp.py client. A slave's STOMP port refuses connections. When the master
demotes (its lock file is replaced under it, or it gets SIGTERM), a stomp.py
client connected to it is disconnected at once, without sending anything and
without heart-beats to time out, and the old master's port refuses
connections from then on while it is not master.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest
import stomp.exception

from primacy.broker import codes
from primacy.share.layout import LOCK_FILE_NAME
from tests.broker.stomppy import Collector, StompPy
from tests.harness.group import Group, NodeProcess, free_port, wait_until

pytestmark = pytest.mark.slow

# "At once", as behaviour rather than a stopwatch: the broker ends each connection in its
# own stop (an ERROR "broker shutting down" before the close, then "STOMP connector
# stopped" in the node's log), after the node decided to stop serving, and without the
# client doing anything. A close that waited for the client to send something, or for a
# heart-beat, never comes at all here: the clients are idle and heart-beats are off. (How
# many milliseconds it takes, 1-3 when measured, is not asserted: a busy two-core machine
# made a 0.5 s bound flaky.)


class TimedCollector(Collector):
    """Also notes when stomp.py saw the connection end, on this process's clocks."""

    def __init__(self) -> None:
        super().__init__()
        self.disconnected_at_monotonic: float | None = None
        self.disconnected_at_unix_s: float | None = None

    def on_disconnected(self) -> None:
        self.disconnected_at_monotonic = time.monotonic()
        self.disconnected_at_unix_s = time.time()
        super().on_disconnected()


class StompNodes:
    """Two nodes, each serving STOMP on its own fixed port while master."""

    def __init__(self, group: Group) -> None:
        self.ports = {node_id: free_port() for node_id in ("n1", "n2")}
        self.nodes = {
            node_id: group.start(node_id, "--stomp", f"127.0.0.1:{port}")
            for node_id, port in self.ports.items()
        }
        for node in self.nodes.values():
            wait_until(lambda node=node: node.status("/health") == 200, 20, "/health")
        self.group = group

    def address(self, node: NodeProcess) -> tuple[str, int]:
        return ("127.0.0.1", self.ports[node.node_id])

    def other(self, node: NodeProcess) -> NodeProcess:
        return next(n for n in self.nodes.values() if n is not node)

    def connect(self, node: NodeProcess) -> StompPy:
        """A stomp.py client on the node's port, idle: no heart-beats either way."""
        client = StompPy(self.address(node))
        listener = TimedCollector()
        client.connection.set_listener("collector", listener)
        client.listener = listener
        return client


def refuses(address: tuple[str, int]) -> bool:
    """True if nothing listens there: the kernel refuses the TCP connection."""
    try:
        with socket.create_connection(address, timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def log_time_of(node: NodeProcess, code: str) -> float:
    """Wall-clock time (Unix s) of the node's first log line with ``code``."""
    for line in node.log().splitlines():
        if code in line:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            return stamp.timestamp()  # the node logs local time, as this process reads it
    raise AssertionError(f"{node.node_id} never logged {code}")


def connector_stopped_at(node: NodeProcess) -> float:
    """When the node logged its STOMP connector stopped: after the loop that aborted every
    connection has ended (a client may see its close before the line is written)."""
    wait_until(lambda: codes.SERVICE_STOPPED in node.log(), 10, "the connector's stop line")
    return log_time_of(node, codes.SERVICE_STOPPED)


def records_written(node: NodeProcess) -> int:
    """Journal records the node committed (each past its fencing check)."""
    status = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=5).json()
    written: int = status["journal"]["records_written"]
    return written


def assert_closed_by_the_broker(client: StompPy) -> None:
    """The broker said why before closing: not a crash, not the process exiting."""
    messages = [error.headers.get("message", "") for error in client.listener.errors]
    assert messages == [codes.title(codes.SHUTTING_DOWN)], messages


def test_a_slaves_stomp_port_refuses_connections_the_masters_serves(group: Group) -> None:
    nodes = StompNodes(group)
    master = group.wait_for_master()
    slave = nodes.other(master)
    client = nodes.connect(master)
    assert client.send("/queue/a", "hello", **{"message-id": "m-1"})
    for _ in range(10):  # not a start-up race: the slave never listens
        assert refuses(nodes.address(slave))
        with pytest.raises(stomp.exception.ConnectFailedException):
            StompPy(nodes.address(slave))
        assert slave.status("/slave") == 200
        time.sleep(0.1)
    assert client.connection.is_connected()
    client.close()


def test_demotion_by_a_replaced_lock_file_closes_the_listener_and_connections_at_once(
    group: Group, share: Path
) -> None:
    nodes = StompNodes(group)
    old = group.wait_for_master()
    clients = [nodes.connect(old) for _ in range(3)]
    assert clients[0].send("/queue/a", "before", **{"message-id": "m-1"})
    written = records_written(old)
    clients[1].subscribe("/queue/a", "s1", ack="client-individual")
    assert clients[1].message().headers["message-id"] == "m-1"
    # The delivery is journaled after the MESSAGE goes out: a lock replaced before that commit
    # fences it, and the broker stops for its journal (PRIMACY-1514), not for the demotion.
    wait_until(lambda: records_written(old) > written, 10, "the delivery to be journaled")

    replaced_at = time.monotonic()
    (share / "replacement").write_text("")
    os.replace(share / "replacement", share / LOCK_FILE_NAME)
    for client in clients:
        assert client.listener.disconnected.wait(10), "a client of the old master stayed connected"
    # The listener closed before the connections were aborted, and the old master
    # cannot serve again before its takeover delay: nothing may listen now.
    assert refuses(nodes.address(old))

    demoted_at = log_time_of(old, "PRIMACY-1003")
    for client in clients:
        listener: TimedCollector = client.listener  # type: ignore[assignment]
        assert listener.disconnected_at_unix_s is not None
        assert listener.disconnected_at_monotonic is not None
        # Closed by the demotion: not before the lock was replaced, nor before the node
        # logged it (log stamps are to the millisecond, hence the 0.05 s of slack).
        assert listener.disconnected_at_monotonic > replaced_at
        assert listener.disconnected_at_unix_s - demoted_at >= -0.05
        assert_closed_by_the_broker(client)
    assert connector_stopped_at(old) >= demoted_at - 0.001

    new = group.wait_for_master(timeout_s=15)
    slave = nodes.other(new)
    wait_until(lambda: slave.status("/slave") == 200, 10, "the other node to be slave")
    assert refuses(nodes.address(slave))
    consumer = nodes.connect(new)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    again = consumer.message()  # the unacknowledged message survived the demotion
    assert (again.headers["message-id"], again.headers["redelivered"]) == ("m-1", "true")
    consumer.close()


def test_sigterm_closes_a_connected_clients_connection_at_once(group: Group) -> None:
    nodes = StompNodes(group)
    old = group.wait_for_master()
    client = nodes.connect(old)
    assert client.send("/queue/a", "before", **{"message-id": "m-1"})

    signalled_at = time.monotonic()
    old.signal(signal.SIGTERM)
    assert client.listener.disconnected.wait(10), "the client of the stopping master stayed"
    listener: TimedCollector = client.listener  # type: ignore[assignment]
    assert listener.disconnected_at_monotonic is not None
    assert listener.disconnected_at_monotonic > signalled_at
    assert listener.disconnected_at_unix_s is not None
    stopped_serving_at = log_time_of(old, "PRIMACY-1006")
    assert listener.disconnected_at_unix_s - stopped_serving_at >= -0.05  # stamps are to the ms
    assert_closed_by_the_broker(client)
    assert connector_stopped_at(old) >= stopped_serving_at - 0.001
    assert refuses(nodes.address(old))
    assert old.process.wait(15) == 0

    new = group.wait_for_master(timeout_s=15, exclude={old.node_id})
    consumer = nodes.connect(new)
    consumer.subscribe("/queue/a", "s1")
    assert consumer.message().headers["message-id"] == "m-1"
    consumer.close()
