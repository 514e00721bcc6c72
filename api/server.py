"""Runs the status application on uvicorn in a thread the supervisor owns."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI

from primacy.api.http_protocol import Admission, GuardedH11Protocol

log = logging.getLogger("primacy.api")

# Connections the kernel queues for the endpoint, and asyncio accepts at most per wakeup: each
# holds a descriptor before the admission budget judges it (the node's descriptor plan counts
# them). Load balancers and monitoring are few; uvicorn's default of 2048 let a flood take
# every descriptor the node had (issue 27).
ACCEPT_BACKLOG = 64


def accept_backlog(max_connections: int) -> int:
    """The listen backlog of an endpoint serving at most ``max_connections``: never more."""
    return min(ACCEPT_BACKLOG, max_connections)


_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class ApiServerError(Exception):
    """The HTTP listener could not start (address in use, bad address)."""


class ApiServer:
    """Bind in the caller's thread (so errors surface there), then serve on a background thread."""

    def __init__(
        self,
        app: FastAPI,
        host: str,
        port: int,
        admission: Admission,
        ssl_context: ssl.SSLContext | None = None,
        on_thread_death: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=5,
            backlog=accept_backlog(admission.total),
            # Connections per network and in all (``admission``, which replaces uvicorn's
            # limit_concurrency: that one answered health checks 503 too), and a deadline for
            # each whole request (http_protocol.py): slow clients cannot hold every slot.
            http=GuardedH11Protocol.admitting(admission),
        )
        if ssl_context is not None:
            # uvicorn builds its own context from file names and never reloads it; this one
            # hands each handshake the newest certificate (broker/tls.py).
            config.load()
            config.ssl = ssl_context
        self._server = uvicorn.Server(config)
        self._host, self._port = host, port
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.address = f"{host}:{port}"
        # Told, on the server's thread, of an exception that ends it (its owner stops).
        self._on_thread_death = on_thread_death

    def start(self, timeout_s: float = 10.0) -> None:
        self._socket = self._bind()
        self._thread = threading.Thread(
            target=self._run, args=(self._socket,), name="primacy-http", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ApiServerError(f"the HTTP listener on {self.address} did not start")
            time.sleep(0.01)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._server.should_exit = True
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout_s)
        if self._socket is not None:
            self._socket.close()

    def _run(self, sock: socket.socket) -> None:
        try:
            asyncio.run(self._serve(sock))
        except BaseException as exc:
            if self._on_thread_death is None:
                raise
            self._on_thread_death(threading.current_thread().name, exc)

    async def _serve(self, sock: socket.socket) -> None:
        asyncio.get_running_loop().set_exception_handler(_on_loop_exception)
        await self._server.serve(sockets=[sock])

    def _bind(self) -> socket.socket:
        try:
            infos = socket.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ApiServerError(f"cannot listen on {self.address}: {exc.strerror}") from exc
        family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and address[0] == "::":
            # The IPv6 wildcard takes IPv4 too (what the config's conflict check assumes),
            # whatever the host's net.ipv6.bindv6only says.
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        try:
            sock.bind(address)
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise ApiServerError(f"cannot listen on {self.address}: {exc.strerror}") from exc
        sock.set_inheritable(False)
        return sock


def _on_loop_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """An accept that failed for want of descriptors is one warning, not a traceback: asyncio
    pauses the listener a second and accepts again."""
    error = context.get("exception")
    if (
        isinstance(error, OSError)
        and error.errno in _OUT_OF_RESOURCES
        and "accept" in str(context.get("message", ""))
    ):
        log.warning("the HTTP endpoint cannot accept a connection: %s; retrying in a second", error)
        return
    loop.default_exception_handler(context)
