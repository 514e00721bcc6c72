"""Runs the status application on uvicorn in a thread the supervisor owns."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import uvicorn
from fastapi import FastAPI

from primacy.api.http_protocol import GuardedH11Protocol

MAX_CONNECTIONS = 64


class ApiServerError(Exception):
    """The HTTP listener could not start (address in use, bad address)."""


class ApiServer:
    """Bind in the caller's thread (so errors surface there), then serve on a background thread."""

    def __init__(
        self, app: FastAPI, host: str, port: int, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            # A flood of connections gets 503s beyond this, not the process's descriptors.
            limit_concurrency=MAX_CONNECTIONS,
            timeout_keep_alive=5,
            # A deadline for each request's head and a cap per source address
            # (http_protocol.py): slow clients cannot hold every slot.
            http=GuardedH11Protocol,
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

    def start(self, timeout_s: float = 10.0) -> None:
        self._socket = self._bind()
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            name="primacy-http",
            daemon=True,
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

    def _bind(self) -> socket.socket:
        try:
            infos = socket.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ApiServerError(f"cannot listen on {self.address}: {exc.strerror}") from exc
        family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise ApiServerError(f"cannot listen on {self.address}: {exc.strerror}") from exc
        sock.set_inheritable(False)
        return sock
