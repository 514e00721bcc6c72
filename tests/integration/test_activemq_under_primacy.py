"""Debian's ActiveMQ under primacy: two nodes each supervising a real ActiveMQ 5.17 on one
shared KahaDB directory, HAProxy in front checking /master, stock stomp.py clients through
HAProxy. The master's supervisor is SIGKILLed, then the next one is SIGSTOPped; and, on two
emulated NFS hosts (the fault harness), the master's share is cut. Each time no two
ActiveMQ processes run at once (their processes and listening ports are sampled
throughout), and every message ActiveMQ receipted is consumed at the end.

The recipe is docs/operator-guide.md, "Supervising your own broker".
"""

from __future__ import annotations

import queue
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import stomp.exception

from bench.activemq.config import missing_activemq
from bench.activemq.under_primacy import HAPROXY, NODES, ActiveMQUnderPrimacy
from bench.activemq.watch import BrokerWatch, StoreWatch
from primacy.cli.localgroup import http_status
from tests.broker.stomppy import StompPy
from tests.harness.emulated_hosts import EmulatedHosts
from tests.harness.group import wait_until
from tests.harness.jvm import SHORT_LIVED_JVM_OPTIONS

pytestmark = pytest.mark.slow

QUEUE = "/queue/under-primacy"


def _connect(amq: ActiveMQUnderPrimacy) -> StompPy:
    """A stomp.py connection through HAProxy once it sees a master; retried across failover."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        wait_until(lambda: http_status(amq.stats_port, "/") == 200, 120, "HAProxy: a master")
        try:
            return StompPy(amq.stomp_addresses()[0])
        except (stomp.exception.ConnectFailedException, OSError):
            time.sleep(0.2)
    raise AssertionError("no STOMP connection through HAProxy within 120 s")


def _send(amq: ActiveMQUnderPrimacy, bodies: list[str]) -> list[str]:
    """Send each body with a receipt, as a client with a reconnect loop does: a connection
    lost to a failover is made again through HAProxy and the unreceipted body sent again.
    The bodies ActiveMQ receipted, in order."""
    receipted: list[str] = []
    pending = list(bodies)
    deadline = time.monotonic() + 180
    while pending:
        assert time.monotonic() < deadline, f"{len(pending)} bodies never receipted"
        client = _connect(amq)
        try:
            while pending and client.send(QUEUE, pending[0], persistent="true"):
                receipted.append(pending.pop(0))
        except (stomp.exception.NotConnectedException, OSError):
            pass  # the broker went away mid-send
        finally:
            client.close()
    return receipted


def _consume(amq: ActiveMQUnderPrimacy, expected: list[str]) -> set[str]:
    """Every body one consumer gets through HAProxy, until it has ``expected`` or 60 s pass."""
    consumer = _connect(amq)
    consumer.subscribe(QUEUE, "all", ack="auto")
    consumed: set[str] = set()
    deadline = time.monotonic() + 60
    while not set(expected) <= consumed and time.monotonic() < deadline:
        try:
            consumed.add(str(consumer.message(timeout_s=1).body))
        except queue.Empty:  # more may still come
            pass
    consumer.close()
    return consumed


def _assert_one_broker_and_nothing_lost(
    watch: BrokerWatch, receipted: list[str], consumed: set[str], sent: int
) -> None:
    assert watch.samples > 100
    assert watch.overlaps == [], f"two ActiveMQ JVMs ran at once: {watch.overlaps[:5]}"
    assert watch.listening_overlaps == []
    assert len(receipted) == sent, f"ActiveMQ receipted {len(receipted)} of {sent}"
    assert set(receipted) <= consumed, sorted(set(receipted) - consumed)[:10]


def _skip_without_activemq_or_haproxy() -> None:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    reason = missing_activemq()
    if reason is not None:
        pytest.skip(f"{reason} (bash .ci/setup dev installs it as root)")


@pytest.fixture
def amq(tmp_path: Path) -> Iterator[ActiveMQUnderPrimacy]:
    _skip_without_activemq_or_haproxy()
    # The default keepalive (250 ms): a 500 ms one here once hid the guardian killing a
    # healthy ActiveMQ under load (issue 27).
    group = ActiveMQUnderPrimacy(tmp_path, 256, jvm_options=SHORT_LIVED_JVM_OPTIONS)
    try:
        yield group
    finally:
        group.close()


def test_activemq_under_primacy_never_runs_twice_and_keeps_what_it_receipted(
    amq: ActiveMQUnderPrimacy,
) -> None:
    with BrokerWatch(amq.bases, amq.stomp_ports) as watch:
        amq.start()
        first = amq.wait_for_a_master()
        second = amq.group.nodes[next(n for n in amq.stomp_ports if n != first.node_id)]
        receipted = _send(amq, [f"before kill {n}" for n in range(20)])

        # 1. SIGKILL of the master's supervisor: its ActiveMQ dies with it, the other node's
        #    starts, clients follow through HAProxy.
        first.signal(signal.SIGKILL)
        first.process.wait(10)
        wait_until(second.is_master, 120, "the other node to serve")
        receipted += _send(amq, [f"after kill {n}" for n in range(20)])

        # 2. SIGSTOP of the new master's supervisor: it cannot confirm its claim, so its
        #    ActiveMQ is killed within a keepalive. It still holds the lock (a local share),
        #    so the group has no master until it is killed for good.
        restarted = amq.start_node(first.node_id)
        wait_until(lambda: restarted.status("/slave") == 200, 60, "a standby")
        second.signal(signal.SIGSTOP)
        wait_until(lambda: second.node_id not in watch.running(), 10, "the stopped JVM to die")
        assert restarted.status("/master") == 503
        second.signal(signal.SIGKILL)
        second.signal(signal.SIGCONT)
        wait_until(restarted.is_master, 120, "the standby to serve")
        receipted += _send(amq, [f"after stop {n}" for n in range(20)])

        consumed = _consume(amq, receipted)
    _assert_one_broker_and_nothing_lost(watch, receipted, consumed, 60)
    assert "PRIMACY-1106" in second.log()  # its guardian killed it, not the test


@pytest.mark.fuse
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_cut_share_kills_the_masters_activemq_before_the_other_serves(
    emulated_hosts: EmulatedHosts, tmp_path: Path, warm: bool
) -> None:
    """Cold, the other node starts its JVM once it serves; warm, its loaded standby passes
    its gate (the recipe of "A warm standby behind a gate"), and a node whose share is cut
    never opens one: no lease check passes there."""
    _skip_without_activemq_or_haproxy()
    # Each node on its own emulated NFS host: the server gives a cut host's locks (primacy's
    # and ActiveMQ's backstop locker's) to others once its lease has run out.
    hosts = dict(zip(NODES, emulated_hosts(len(NODES), lease_s=2.0), strict=True))
    root = tmp_path / "amq"
    # A keepalive of 1 s: the emulated share answers from a Python daemon, slowly while two
    # JVMs start on a loaded two-core machine.
    amq = ActiveMQUnderPrimacy(
        root,
        256,
        "--lock-keep-alive-period-ms",
        "1000",
        shares={node_id: host.share for node_id, host in hosts.items()},
        warm=warm,
        jvm_options=SHORT_LIVED_JVM_OPTIONS,
    )
    try:
        with StoreWatch(amq) as watch:
            amq.start()
            first = amq.wait_for_a_master()
            second = amq.group.nodes[next(n for n in NODES if n != first.node_id)]
            wait_until(lambda: second.status("/slave") == 200, 60, "a standby")
            receipted = _send(amq, [f"before cut {n}" for n in range(20)])

            # The master's host loses the server: its lease checks hang, so its claim lapses
            # and its guardian kills ActiveMQ; the other node serves once the server has
            # expired the cut host's lease.
            hosts[first.node_id].partition("hang")
            # (It may stay in the process table, killed, while a call into the share holds
            # one of its threads; BrokerWatch counts it only while it may run.)
            wait_until(lambda: first.node_id not in watch.running(), 10, "the cut JVM's kill")
            wait_until(second.is_master, 120, "the other node to serve")
            receipted += _send(amq, [f"after cut {n}" for n in range(20)])

            # Healed, the cut node finds its lock gone and stands by.
            hosts[first.node_id].heal()
            wait_until(lambda: first.status("/slave") == 200, 60, "the healed node to stand by")
            consumed = _consume(amq, receipted)
    finally:
        for host in hosts.values():
            host.heal()  # nothing may stay blocked on the mount while the nodes are killed
        amq.close()
    _assert_one_broker_and_nothing_lost(watch, receipted, consumed, 40)
    assert watch.store_overlaps == [], f"two JVMs in the store: {watch.store_overlaps[:5]}"
    assert watch.seen_in_store == set(NODES)  # the watch saw each master's JVM inside
    assert "PRIMACY-1106" in first.log()  # its guardian killed it
