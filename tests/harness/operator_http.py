"""A node's HTTP API as an operator calls it: its URLs, and the admin endpoints with the
bearer token of the tests' admin token file."""

from __future__ import annotations

import socket

import httpx

from primacy.cli.localgroup import NodeProcess

TOKEN = "s3cret-token-for-tests-only"


def url(node: NodeProcess, path: str) -> str:
    return f"http://127.0.0.1:{node.port}{path}"


def admin(
    node: NodeProcess,
    method: str,
    path: str,
    token: str | None = TOKEN,
    json: dict[str, object] | None = None,
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, url(node, path), headers=headers, json=json, timeout=15)


def half_sent_requests(node: NodeProcess, count: int, addresses: int = 4) -> list[socket.socket]:
    """``count`` connections to the node's HTTP endpoint, from ``addresses`` loopback
    addresses (127.0.0.2 on), each sending a request's first line and never the rest:
    what holds an endpoint open. The caller closes them."""
    sockets: list[socket.socket] = []
    try:
        for number in range(count):
            sock = socket.socket()
            sockets.append(sock)
            sock.bind((f"127.0.0.{2 + number % addresses}", 0))
            sock.connect(("127.0.0.1", node.port))
            sock.sendall(b"GET /master HTTP/1.1\r\nHost: x\r\n")  # and never the rest
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets
