"""The STOMP/HTTP listen-address conflict check knows both address families: ``[::]`` listens
dual-stack and takes the port on every address, ``0.0.0.0`` only on IPv4's, and an IPv4 and an
IPv6 address of one port are two listeners (issue 48)."""

from __future__ import annotations

import pytest

from primacy.supervisor.config.listen_addresses import same_listener


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("[::1]:7000", "[::1]:7000"),
        ("[::1]:7000", "[::]:7000"),
        ("127.0.0.1:7000", "[::]:7000"),
        ("0.0.0.0:7000", "[::]:7000"),
        ("[::ffff:127.0.0.1]:7000", "127.0.0.1:7000"),
        ("*:7000", "[::1]:7000"),  # every address, both families
    ],
)
def test_listeners_that_would_collide(first: str, second: str) -> None:
    assert same_listener(first, second) and same_listener(second, first)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("127.0.0.1:7000", "[::1]:7000"),
        ("0.0.0.0:7000", "[::1]:7000"),  # Linux binds both: the IPv4 wildcard leaves ::1
        ("[::1]:7000", "[::1]:7001"),
    ],
)
def test_listeners_that_do_not_collide(first: str, second: str) -> None:
    assert not same_listener(first, second) and not same_listener(second, first)
