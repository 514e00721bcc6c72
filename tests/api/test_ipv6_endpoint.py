"""The HTTP endpoint on IPv6: ``[::]`` listens dual-stack, whatever the host's
``net.ipv6.bindv6only`` says, as the config's conflict check assumes (issue 48). Skipped, with
the reason, only where the host has no IPv6 loopback. (On a host whose ``bindv6only`` is 0,
Linux's default, the wildcard was dual-stack before the endpoint asked for it too.)"""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from primacy.api.server import ApiServer
from primacy.broker.admission import Budget
from tests.broker.test_ipv6_listeners import _no_ipv6_loopback
from tests.harness.group import free_port


@pytest.mark.skipif(_no_ipv6_loopback() is not None, reason=str(_no_ipv6_loopback()))
def test_the_ipv6_wildcard_answers_both_families() -> None:
    app = FastAPI()
    app.get("/health")(lambda: {"ok": True})
    port = free_port()
    server = ApiServer(app, "::", port, Budget(64, 16))
    server.start()
    try:
        for host in ("127.0.0.1", "[::1]"):
            assert httpx.get(f"http://{host}:{port}/health", timeout=5).status_code == 200
    finally:
        server.stop()
