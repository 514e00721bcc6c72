"""Failover URL parsing: ActiveMQ's syntax, options and defaults."""

from __future__ import annotations

import pytest

from primacy.client.url import BrokerAddress, FailoverOptions, UrlError, parse_url

FULL = (
    "failover:(tcp://h1:61613,tcp://h2:61614)?initialReconnectDelay=10&maxReconnectDelay=30000"
    "&useExponentialBackOff=true&backOffMultiplier=2&maxReconnectAttempts=-1"
    "&startupMaxReconnectAttempts=-1&randomize=true&timeout=-1"
)


def test_the_full_example_gives_the_defaults_it_spells_out() -> None:
    url = parse_url(FULL)
    assert url.addresses == (BrokerAddress("h1", 61613), BrokerAddress("h2", 61614))
    assert url.options == FailoverOptions()


def test_activemq_defaults() -> None:
    options = FailoverOptions()
    assert options.initial_reconnect_delay_ms == 10
    assert options.max_reconnect_delay_ms == 30_000
    assert options.use_exponential_back_off is True
    assert options.back_off_multiplier == 2.0
    assert options.max_reconnect_attempts == -1
    assert options.startup_max_reconnect_attempts == -1
    assert options.randomize is True
    assert options.timeout_ms == -1


def test_options_are_read() -> None:
    url = parse_url(
        "failover://(tcp://a:1)?initialReconnectDelay=100&maxReconnectDelay=5000"
        "&useExponentialBackOff=false&backOffMultiplier=1.5&maxReconnectAttempts=3"
        "&startupMaxReconnectAttempts=0&randomize=FALSE&timeout=2500"
    )
    assert url.options == FailoverOptions(100, 5000, False, 1.5, 3, 0, False, 2500)


@pytest.mark.parametrize(
    ("text", "addresses"),
    [
        ("tcp://localhost:61613", [("localhost", 61613)]),
        ("stomp://10.0.0.1", [("10.0.0.1", 61613)]),
        ("tcp://[::1]:7000", [("::1", 7000)]),
        ("failover:tcp://a:1,tcp://b:2", [("a", 1), ("b", 2)]),
        ("failover:(tcp://a:1)", [("a", 1)]),
        ("  failover:( tcp://a:1 , tcp://b:2 )?randomize=false ", [("a", 1), ("b", 2)]),
    ],
)
def test_address_forms(text: str, addresses: list[tuple[str, int]]) -> None:
    assert parse_url(text).addresses == tuple(BrokerAddress(h, p) for h, p in addresses)


def test_ignored_activemq_options_are_accepted() -> None:
    url = parse_url("failover:(tcp://a:1)?backup=true&trackMessages=true&priorityBackup=true")
    assert url.options == FailoverOptions()


def test_the_older_name_of_the_multiplier_works() -> None:
    assert (
        parse_url("failover:(tcp://a:1)?reconnectDelayExponent=3").options.back_off_multiplier == 3
    )


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("http://a:1", "scheme"),
        ("failover:()", "no broker"),
        ("failover:(tcp://a:1", "never closed"),
        ("failover:(tcp://a:1)x", "expected '?'"),
        ("failover:(tcp://a:1)?initialReconectDelay=5", "unknown failover option"),
        ("failover:(tcp://a:1)?randomize=yes", "true or false"),
        ("failover:(tcp://a:1)?timeout=soon", "must be a int"),
        ("failover:(tcp://a:1)?backOffMultiplier=0.5", "at least 1"),
        ("failover:(tcp://a:1)?maxReconnectAttempts=-2", "-1"),
        ("tcp://a:99999", "99999"),
        ("tcp://:5", "no host"),
        ("tcp://a:1/path", "no path"),
    ],
)
def test_bad_urls_say_what_is_wrong(text: str, complaint: str) -> None:
    with pytest.raises(UrlError) as raised:
        parse_url(text)
    assert complaint in str(raised.value)
    assert raised.value.code == "PRIMACY-1601"
