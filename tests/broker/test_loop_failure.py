"""A bug on the broker's event loop stops the broker loudly and fails its node.

An exception is injected into a running broker (a real ``BrokerService`` over a
real journal, driven by stomp.py): in a STOMP command handler (SUBSCRIBE's call to its
connection's temporary queues, an interpreted class the compiled handler calls through
Python, so the bug reaches it compiled or not), reached through
asyncio's ``buffer_updated`` (where asyncio alone logs "Fatal error:
protocol.buffer_updated() call failed" with no code, or nothing at all for an
``OSError``, and serves on), and in a plain callback of the loop. The service's
tests hand the node's own thread-death hook a list, to see what the role loop
would be told; the last test runs a whole node in-process and sees it stop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from primacy.broker import codes
from primacy.broker.core import Broker
from primacy.broker.temp_queues import ConnectionTempQueues
from primacy.cli.localgroup import free_port
from primacy.supervisor import codes as node_codes
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.shell.node import Node
from primacy.supervisor.shell.node_events import ThreadDied
from primacy.supervisor.shell.thread_deaths import ThreadDeaths
from tests.broker.nodes import Master, Masters, RawClient, eventually, stored_state
from tests.broker.stomppy import StompPy


class InjectedBug(Exception):
    pass


@pytest.fixture
def thread_deaths(monkeypatch: pytest.MonkeyPatch) -> list[ThreadDied]:
    """What a node's role loop would be told of threads that die: a node hands its broker its
    ``ThreadDeaths`` (``on_thread_death``); these brokers have no node, so their threads'
    deaths reach ``threading.excepthook``, which hands them to the same handler here."""
    deaths: list[ThreadDied] = []
    handler = ThreadDeaths("node-a", deaths.append)

    def hook(args: threading.ExceptHookArgs) -> None:
        assert args.thread is not None and args.exc_value is not None
        handler.died(args.thread.name, args.exc_value)

    monkeypatch.setattr(threading, "excepthook", hook)
    return deaths


def raising(error: Exception) -> Callable[..., Any]:
    def broken_handler(*_: object) -> Any:
        raise error

    return broken_handler


def assert_failed_loudly(
    master: Master, error: Exception, deaths: list[ThreadDied], caplog: pytest.LogCaptureFixture
) -> None:
    """The code with the handler's traceback in the log, the broker's thread dead, the node
    told (not a journal failure: no demotion through ``on_fatal``), nothing listening."""
    eventually(lambda: deaths != [], "the broker's thread to die")
    assert [death.thread for death in deaths] == ["primacy-broker"]
    assert codes.LOOP_FAILED in deaths[0].error
    assert master.fatal == []
    logged = [r for r in caplog.records if r.getMessage().startswith(codes.LOOP_FAILED)]
    assert len(logged) == 1 and logged[0].levelno == logging.CRITICAL
    assert logged[0].exc_info is not None and logged[0].exc_info[1] is error
    assert "Traceback" in caplog.text and "in broken_handler" in caplog.text
    stats = master.service.stats()
    assert stats["running"] is False and repr(error) in stats["failure"]
    with pytest.raises(ConnectionRefusedError):
        RawClient(master.address)


@pytest.mark.parametrize(
    "error",
    [InjectedBug("a bug in SUBSCRIBE"), OSError(5, "an I/O error nobody caught")],
    ids=["exception", "oserror"],
)
def test_an_exception_in_a_command_handler_fails_the_node_with_a_code(
    masters: Masters,
    thread_deaths: list[ThreadDied],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
) -> None:
    master = masters.start()
    producer = StompPy(master.address)
    assert producer.send("/queue/a", "kept", **{"message-id": "m-0"})
    bystander = RawClient(master.address)
    bystander.connect()
    monkeypatch.setattr(ConnectionTempQueues, "check_subscribe", raising(error))

    producer.connection.subscribe("/queue/a", "s1", ack="client-individual")

    # Every client is told, with the code a failover client takes as "fail over", and cut off.
    assert producer.listener.disconnected.wait(5)
    assert [e.headers["message"].split()[0] for e in producer.listener.errors] == [
        codes.LOOP_FAILED
    ]
    assert [f.get("message", "").split()[0] for f in bystander.read_until_closed()] == [
        codes.LOOP_FAILED
    ]
    assert_failed_loudly(master, error, thread_deaths, caplog)
    master.stop()
    assert "m-0" in stored_state(masters.share).pending["/queue/a"]  # the journal is intact


def test_an_exception_in_a_callback_of_the_loop_fails_the_node_with_a_code(
    masters: Masters,
    thread_deaths: list[ThreadDied],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    master = masters.start()
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s1", ack="client-individual")
    error = InjectedBug("a bug in dispatch")
    monkeypatch.setattr(Broker, "_dispatch", raising(error))

    # The SEND is journaled, then its delivery (a callback the loop runs) raises.
    producer = StompPy(master.address)
    producer.connection.send("/queue/a", "x", headers={"message-id": "m-0"})

    assert consumer.listener.disconnected.wait(5)
    assert [e.headers["message"].split()[0] for e in consumer.listener.errors] == [
        codes.LOOP_FAILED
    ]
    assert_failed_loudly(master, error, thread_deaths, caplog)


def test_a_node_whose_broker_loop_fails_stops_with_exit_code_1(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    share = tmp_path / "share"
    share.mkdir()
    stomp = ("127.0.0.1", free_port())
    node = Node(
        NodeConfig(
            node_id="n1",
            share=share,
            http=f"127.0.0.1:{free_port()}",
            stomp=f"{stomp[0]}:{stomp[1]}",
            lock_keep_alive_period_ms=200,
        )
    )
    exit_codes: list[int] = []
    runner = threading.Thread(target=lambda: exit_codes.append(node.run()), name="test-role-loop")
    runner.start()
    try:
        eventually(lambda: node.snapshot().is_serving_master(), "the node to serve")
        client = StompPy(stomp)
        monkeypatch.setattr(
            ConnectionTempQueues, "check_subscribe", raising(InjectedBug("a bug in SUBSCRIBE"))
        )
        client.connection.subscribe("/queue/a", "s1")
        assert client.listener.disconnected.wait(5)
        runner.join(15)
    finally:
        if runner.is_alive():
            node.request_stop("test over")
            runner.join(15)
    assert exit_codes == [1]
    assert node.snapshot().role == "stopped"
    messages = [record.getMessage() for record in caplog.records]
    assert any(m.startswith(codes.LOOP_FAILED) for m in messages), messages
    assert any(node_codes.THREAD_DIED in m and "primacy-broker" in m for m in messages), messages
