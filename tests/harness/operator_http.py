"""A node's HTTP API as an operator calls it: its URLs, and the admin endpoints with the
bearer token of the tests' admin token file."""

from __future__ import annotations

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
