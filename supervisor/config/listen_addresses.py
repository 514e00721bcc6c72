"""Listen addresses as a node's configuration gives them (``HOST:PORT``, IPv6 in brackets),
and whether two of them would need the same port on some interface."""

from __future__ import annotations

import ipaddress
import socket


def parse_host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not HOST:PORT (for example 127.0.0.1:8008)")
    return host.strip("[]"), int(port)


_EVERY_ADDRESS = frozenset({"", "*"})


def _addresses(host: str, port: int) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses a listener on ``host`` binds: a name resolved (``localhost`` is
    127.0.0.1 and ::1), an IPv4-mapped IPv6 address as its IPv4 one, a wildcard (0.0.0.0,
    ::, an empty host) as the unspecified address. Empty if the name does not resolve:
    the listener then fails to start and says so."""
    if host in _EVERY_ADDRESS:  # the STOMP listener binds these dual-stack (listen_address.py)
        return {ipaddress.IPv6Address(0)}
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError):
        return set()
    addresses: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for *_, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        addresses.add(address)
    return addresses


def same_listener(first: str, second: str) -> bool:
    """Would both addresses need the same port on some interface? Names are resolved, and a
    wildcard of either family takes the port on every address (``::`` also takes IPv4's)."""
    (host_a, port_a), (host_b, port_b) = parse_host_port(first), parse_host_port(second)
    if port_a != port_b:
        return False
    if host_a == host_b:
        return True
    addresses_a, addresses_b = _addresses(host_a, port_a), _addresses(host_b, port_b)
    return any(_overlap(a, b) for a in addresses_a for b in addresses_b)


def _overlap(
    a: ipaddress.IPv4Address | ipaddress.IPv6Address,
    b: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> bool:
    """Would listeners on ``a`` and ``b`` (one port) collide? ``::`` listens dual-stack, so
    it takes every address of both families; ``0.0.0.0`` every IPv4 address only: it leaves
    ``::1`` free, as Linux does."""
    if a == b or (a.version == 6 and a.is_unspecified) or (b.version == 6 and b.is_unspecified):
        return True
    return a.version == b.version and (a.is_unspecified or b.is_unspecified)
