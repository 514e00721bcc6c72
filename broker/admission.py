"""Which network a client's address is in, and how many connections its network may hold.

Both listeners admit connections through a ``Budget``: the STOMP listener (its connections,
those that have not sent CONNECT yet, and logins in progress) and the HTTP endpoint (handed one
by the supervisor: ``api/`` imports nothing of the broker). A limit per address does not stop
one host with several addresses (issue 27: four addresses held the HTTP endpoint), so a budget
counts *networks*: an address's network is its first ``ipv4_prefix`` bits (IPv6:
``ipv6_prefix``), by default a /24 and a /64, what one site or one host is usually given.

A budget holds at most ``total`` connections, and at most ``per_network`` of one network.
Connections that have not yet said what they want (no CONNECT, no complete HTTP request) are
*waiting*, and may be displaced: a newcomer whose network is at its limit displaces that
network's oldest waiting connection, and one arriving when the budget is full displaces the
oldest waiting connection of the network that holds the most, if that network holds more than
the newcomer's (its own oldest, if the newcomer's is that network). A host can therefore only
churn its own idle connections; a client from another network, or one of its own that sends
its request at once, gets in. Connections that are served (logged in, or an HTTP request being
answered) are never displaced: past the limits, the newcomer is refused. What a host with
many networks can still do: docs/safety.md.

The STOMP listener also holds a ``ByteBudget``: bytes, not holders, per network and in all, for
what its connections' subscriptions and transactions keep (``state_limits.py``); nothing is
displaced from it, a request past it is refused.

Sans-I/O: the listener closes what is displaced and says why; nothing here touches a socket.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

H = TypeVar("H", bound=Hashable)

# Connections the kernel queues for the STOMP listener, and asyncio accepts at most per wakeup:
# each holds a descriptor before the budgets judge it (the node's descriptor plan counts them).
ACCEPT_BACKLOG = 128

# An address that is no IP address (a Unix socket, a transport without a peer) is one network.
LOCAL = "local"


@dataclass(frozen=True)
class Networks:
    """Addresses grouped into networks by prefix length."""

    ipv4_prefix: int = 24
    ipv6_prefix: int = 64

    def of(self, address: str | None) -> str:
        """The network ``address`` is in, as text (``192.0.2.0/24``)."""
        try:
            ip = ipaddress.ip_address((address or "").split("%", 1)[0])
        except ValueError:
            return LOCAL
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # a dual-stack listener's IPv4 client is an IPv4 client
        prefix = self.ipv4_prefix if ip.version == 4 else self.ipv6_prefix
        return str(ipaddress.ip_network((ip, prefix), strict=False))


@dataclass(frozen=True)
class Verdict(Generic[H]):
    """A budget's answer to a newcomer: admitted or not, and whom it displaced (to close)."""

    admitted: bool
    displaced: tuple[H, ...] = ()
    refused_by: str = ""  # "network" or "total" when not admitted


@dataclass
class Budget(Generic[H]):
    """At most ``total`` holders, at most ``per_network`` of one network; see the module."""

    total: int
    per_network: int
    networks: Networks = field(default_factory=Networks)
    # Per network, every holder and the waiting ones, oldest first (dicts keep insertion order).
    _held: dict[str, dict[H, None]] = field(default_factory=dict)
    _waiting: dict[str, dict[H, None]] = field(default_factory=dict)
    _network_of: dict[H, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._network_of)

    def held(self, network: str) -> int:
        return len(self._held.get(network, ()))

    def take(self, address: str | None, holder: H, *, waiting: bool = True) -> Verdict[H]:
        """Admit ``holder`` from ``address`` if there is room, or room can be made by displacing
        waiting holders; a waiting holder may itself be displaced later, until ``settle``."""
        network = self.networks.of(address)
        displaced: list[H] = []
        if self.held(network) >= self.per_network:
            victim = _oldest(self._waiting.get(network))
            if victim is None:
                return Verdict(False, refused_by="total" if len(self) >= self.total else "network")
            displaced.append(victim)
        elif len(self) >= self.total:
            victim = self._from_the_fullest(network)
            if victim is None:
                return Verdict(False, refused_by="total")
            displaced.append(victim)
        for victim in displaced:
            self.release(victim)
        self._network_of[holder] = network
        self._held.setdefault(network, {})[holder] = None
        if waiting:
            self._waiting.setdefault(network, {})[holder] = None
        return Verdict(True, tuple(displaced))

    def settle(self, holder: H) -> None:
        """``holder`` is being served: it is never displaced from now on."""
        network = self._network_of.get(holder)
        if network is not None:
            _discard(self._waiting, network, holder)

    def wait(self, holder: H) -> None:
        """``holder`` waits again (an idle kept-alive connection): displaceable, the newest."""
        network = self._network_of.get(holder)
        if network is not None:
            _discard(self._waiting, network, holder)
            self._waiting.setdefault(network, {})[holder] = None

    def release(self, holder: H) -> None:
        """``holder`` is gone; its room is free at once. Releasing twice is harmless."""
        network = self._network_of.pop(holder, None)
        if network is not None:
            _discard(self._held, network, holder)
            _discard(self._waiting, network, holder)

    def _from_the_fullest(self, newcomer: str) -> H | None:
        """The oldest waiting holder of the network holding the most, if it holds more than
        the newcomer's would after taking one (no churn between equals); the newcomer's own
        oldest waiting one if its network holds the most."""
        candidates = [network for network, waiting in self._waiting.items() if waiting]
        if not candidates:
            return None
        fullest = max(candidates, key=self.held)
        if self.held(newcomer) >= self.held(fullest):
            return _oldest(self._waiting.get(newcomer))
        if self.held(fullest) <= self.held(newcomer) + 1:
            return None
        return _oldest(self._waiting[fullest])


@dataclass
class ByteBudget:
    """At most ``total`` bytes held by every holder together, at most ``per_network`` by the
    holders of one network: the STOMP listener's budget for what its connections keep between
    frames (state_limits.py). Nothing is displaced: past either, the request is refused."""

    total: int
    per_network: int
    networks: Networks = field(default_factory=Networks)
    held: int = 0
    _by_network: dict[str, int] = field(default_factory=dict)

    def held_by(self, network: str) -> int:
        return self._by_network.get(network, 0)

    def take(self, network: str, nbytes: int) -> str | None:
        """Hold ``nbytes`` more for ``network`` if both limits allow; else which refused it
        (``"network"`` or ``"total"``), nothing held."""
        if self.held_by(network) + nbytes > self.per_network:
            return "network"
        if self.held + nbytes > self.total:
            return "total"
        self._by_network[network] = self.held_by(network) + nbytes
        self.held += nbytes
        return None

    def give(self, network: str, nbytes: int) -> None:
        """``nbytes`` that ``network`` held are free again."""
        left = self.held_by(network) - nbytes
        if left > 0:
            self._by_network[network] = left
        else:
            self._by_network.pop(network, None)
        self.held -= nbytes


def accept_backlog(max_connections: int) -> int:
    """The listen backlog of a STOMP listener serving at most ``max_connections``: never more."""
    return min(ACCEPT_BACKLOG, max_connections)


def _oldest(holders: dict[H, None] | None) -> H | None:
    return next(iter(holders), None) if holders else None


def _discard(table: dict[str, dict[H, None]], network: str, holder: H) -> None:
    holders = table.get(network)
    if holders is not None:
        holders.pop(holder, None)
        if not holders:
            del table[network]
