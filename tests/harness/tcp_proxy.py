"""A TCP proxy the test controls: forwards one loopback port to another until ``cut``.

Used to cut one node's connection to ZooKeeper while everything else it talks
to stays reachable: its share (a local directory), its HTTP and STOMP ports,
which the test's clients and pollers use. A network namespace would cut those
as well unless routed through a veth pair; the proxy cuts exactly the one path.
``cut`` resets every forwarded connection and refuses new ones (closed at once,
as a dropped route looks to kazoo once its reads time out); ``heal`` forwards again.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from primacy.cli.localgroup import free_port


class TcpProxy:
    """127.0.0.1:``port`` -> 127.0.0.1:``target_port``; threads owned here, ended by ``close``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        self._cut.set()
        self._drop_all()

    def heal(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed.set()
        self._cut.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept
        self._listener.close()
        self._drop_all()
        for thread in self._threads:
            thread.join(5)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _drop_all(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes the pump blocked in recv; close would not
            sock.close()  # with a zero linger: a reset, not a polite end

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=2)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets |= {client, upstream}
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
