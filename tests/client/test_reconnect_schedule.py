"""The failover schedule without a network or a clock: fake connections, recorded sleeps."""

from __future__ import annotations

import random
import socket

import pytest

from primacy.client.errors import ClientTimeout, ConnectionLost, NoBrokerAvailable
from primacy.client.failover import Failover, pass_limit, reconnect_delays_ms
from primacy.client.url import FailoverOptions, parse_url
from primacy.client.wire import StompSocket


def take(options: FailoverOptions, count: int) -> list[float]:
    delays = reconnect_delays_ms(options)
    return [next(delays) for _ in range(count)]


def test_exponential_back_off_doubles_up_to_the_maximum() -> None:
    options = FailoverOptions(initial_reconnect_delay_ms=10, max_reconnect_delay_ms=100)
    assert take(options, 6) == [10, 20, 40, 80, 100, 100]


def test_without_back_off_the_delay_stays() -> None:
    assert take(FailoverOptions(use_exponential_back_off=False), 3) == [10, 10, 10]


def test_the_multiplier_is_used() -> None:
    assert take(FailoverOptions(initial_reconnect_delay_ms=100, back_off_multiplier=1.5), 3) == [
        100,
        150,
        225,
    ]


def test_attempt_limits_count_reconnects_after_the_first_try() -> None:
    assert pass_limit(FailoverOptions(max_reconnect_attempts=-1), True) is None
    assert pass_limit(FailoverOptions(max_reconnect_attempts=0), True) == 1
    assert pass_limit(FailoverOptions(max_reconnect_attempts=3), True) == 4
    assert pass_limit(FailoverOptions(startup_max_reconnect_attempts=2), False) == 3


class FakeNetwork:
    """Addresses that refuse until told otherwise; records every attempt."""

    def __init__(self) -> None:
        self.up: set[int] = set()
        self.attempts: list[int] = []

    def open(
        self, host: str, port: int, timeout_s: float, heart_beat_ms: int, **_: object
    ) -> StompSocket:
        self.attempts.append(port)
        if port not in self.up:
            raise ConnectionLost(f"refused {port}")
        return StompSocket(socket.socket(), 0)  # never connected: only closed


def test_each_pass_tries_every_address_in_order_then_sleeps() -> None:
    network, sleeps = FakeNetwork(), []
    url = parse_url("failover:(tcp://h:1,tcp://h:2)?randomize=false&startupMaxReconnectAttempts=2")
    failover = Failover(url, sleep=sleeps.append, opener=network.open)
    with pytest.raises(NoBrokerAvailable) as raised:
        failover.current()
    assert network.attempts == [1, 2, 1, 2, 1, 2]
    assert sleeps == [0.01, 0.02]
    assert "3 pass(es)" in str(raised.value)


def test_it_connects_to_whichever_address_accepts_and_calls_on_connect() -> None:
    network, connected = FakeNetwork(), []
    network.up = {2}
    url = parse_url("failover:(tcp://h:1,tcp://h:2,tcp://h:3)?randomize=false")
    failover = Failover(url, sleep=lambda s: None, opener=network.open, on_connect=connected.append)
    failover.current()
    assert failover.address is not None and failover.address.port == 2
    assert len(connected) == 1 and failover.generation == 1


def test_randomize_shuffles_the_order() -> None:
    network = FakeNetwork()
    url = parse_url("failover:(" + ",".join(f"tcp://h:{p}" for p in range(1, 9)) + ")")
    url = type(url)(url.addresses, FailoverOptions(startup_max_reconnect_attempts=0))
    failover = Failover(url, sleep=lambda s: None, opener=network.open, rng=random.Random(4))
    with pytest.raises(NoBrokerAvailable):
        failover.current()
    assert sorted(network.attempts) == list(range(1, 9))
    assert network.attempts != list(range(1, 9))


def test_after_a_loss_it_reconnects_with_the_running_limit() -> None:
    network = FakeNetwork()
    network.up = {1}
    url = parse_url("failover:(tcp://h:1)?maxReconnectAttempts=1")
    failover = Failover(url, sleep=lambda s: None, opener=network.open)
    failover.current()
    failover.lost("test")
    network.up = set()
    with pytest.raises(NoBrokerAvailable):
        failover.current()
    assert network.attempts == [1, 1, 1]


def test_timeout_gives_up_waiting_for_a_broker() -> None:
    network = FakeNetwork()
    url = parse_url("failover:(tcp://h:1)?timeout=0&initialReconnectDelay=1000")
    with pytest.raises(ClientTimeout):
        Failover(url, sleep=lambda s: None, opener=network.open).current()
