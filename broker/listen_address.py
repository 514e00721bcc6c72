"""The listening socket for a HOST:PORT of either address family (the STOMP listener's, its
TLS included; the WebSocket listener's may use it too).

``socket.create_server`` binds an IPv4 socket unless told the family, so ``::1`` failed with
"Address family for hostname not supported" (issue 48). Here the family comes from the
address: an IPv6 literal binds IPv6; the wildcards (``::``, ``0.0.0.0``, and ``*`` or an
empty host for "every address") bind what they say, ``::`` dual-stack where the kernel allows
it, so ``[::]:P`` also takes IPv4's ``P`` (what the config's conflict check assumes). A name
that resolves to both families (``localhost``) binds its IPv4 address, as before: one socket,
and the address IPv4 clients were given.
"""

from __future__ import annotations

import socket

EVERY_ADDRESS = frozenset({"", "*"})


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """Bound and listening on ``host`` (no brackets), ``port``; OSError if it cannot bind."""
    if host in EVERY_ADDRESS:
        host = "::" if socket.has_ipv6 and socket.has_dualstack_ipv6() else "0.0.0.0"
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, *_, address = min(found, key=lambda info: info[0] != socket.AF_INET)
    dual_stack = family == socket.AF_INET6 and address[0] == "::" and socket.has_dualstack_ipv6()
    return socket.create_server(
        address, family=family, backlog=backlog, reuse_port=False, dualstack_ipv6=dual_stack
    )
