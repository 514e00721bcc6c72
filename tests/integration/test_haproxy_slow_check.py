"""The warm-standby recipe's HAProxy lines keep a live master's sessions through a slow check.

Issue 47: with ``fall 1`` and no ``timeout check`` (so a check had ``inter``, 100 ms, to
answer), one ``/master`` answer later than that marked a live master down, and
``on-marked-down shutdown-sessions`` cut every client on it. Here Debian's HAProxy runs
the guide's lines in front of a session on "node-a". The node's ``/master`` is a small HTTP
stub, not a real node: a real node cannot be made to answer one check late on demand
without freezing the whole node, which would end its claim and its sessions for other
reasons. The stub answers 200 at once, except the checks it is told to hold: one for 0.5 s
(later than ``inter``, within ``timeout check``), then one past ``timeout check`` (a failed
check). Node-b's stub answers 503, as a slave's does. The old lines, run the same way, cut
the session on the first slow answer: what shows the test can fail.
"""

from __future__ import annotations

import shutil
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from primacy.cli.localgroup import free_port
from tests.harness.group import wait_until
from tests.harness.guide_examples import (
    replace_setting,
    warm_haproxy_config,
    warm_haproxy_lines,
)
from tests.harness.haproxy import stop_process

pytestmark = pytest.mark.slow
HAPROXY = shutil.which("haproxy")
# The recipe's lines before issue 47.
BEFORE = [
    "timeout connect 100ms",
    "default-server inter 100ms fall 1 rise 1 on-marked-down shutdown-sessions",
]


class MasterStub(ThreadingHTTPServer):
    """``/master`` of one node: ``status`` at once, or after ``hold_s`` for the next check."""

    daemon_threads = True

    def __init__(self, status: int) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.status = status
        self.answered = 0  # checks answered so far
        self.holds: list[float] = []  # delays for the next checks, in order
        self.lock = threading.Lock()

    def hold_next(self, seconds: float) -> int:
        """Answer the next check ``seconds`` late; returns the count it will be answered at."""
        with self.lock:
            self.holds.append(seconds)
            return self.answered + len(self.holds)


class _Answer(BaseHTTPRequestHandler):
    server: MasterStub

    def do_GET(self) -> None:
        with self.server.lock:
            hold = self.server.holds.pop(0) if self.server.holds else 0.0
        if hold:
            time.sleep(hold)  # the slow answer under test, not a wait of the test's own
        try:
            self.send_response(self.server.status)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            pass  # HAProxy gave up on it (timeout check)
        with self.server.lock:
            self.server.answered += 1

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


class EchoServer(socketserver.ThreadingTCPServer):
    """The master's broker port: what a client session through HAProxy reaches."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Echo)


@pytest.fixture
def stubs() -> Iterator[tuple[MasterStub, MasterStub, EchoServer]]:
    servers = (MasterStub(200), MasterStub(503), EchoServer())
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    yield servers
    for server in servers:
        server.shutdown()
        server.server_close()


def _echoes(session: socket.socket) -> bool:
    try:
        session.sendall(b"ping\n")
        return session.recv(16) == b"ping\n"
    except OSError:
        return False


def _answered(stub: MasterStub, count: int) -> bool:
    with stub.lock:
        return stub.answered >= count


@pytest.mark.parametrize("recipe", ["now", "before issue 47"])
def test_one_slow_master_check_does_not_cut_the_masters_sessions(
    stubs: tuple[MasterStub, MasterStub, EchoServer], tmp_path: Path, recipe: str
) -> None:
    if HAPROXY is None:
        pytest.skip("haproxy is not installed (bash .ci/setup dev installs it as root)")
    a, b, echo = stubs
    front = free_port()
    backends = {
        "node-a": (echo.server_address[1], a.server_address[1]),
        "node-b": (free_port(), b.server_address[1]),  # a slave: 503, nothing listens
    }
    lines = warm_haproxy_lines() if recipe == "now" else BEFORE
    config = tmp_path / "haproxy.cfg"
    text = warm_haproxy_config(front, backends, lines)
    if recipe != "now":  # the lines before issue 47 had no check timeout: a check got `inter`
        text = replace_setting(text, "timeout check", "")
    config.write_text(text)
    proxy = subprocess.Popen(
        [HAPROXY, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        session: list[socket.socket] = []

        def connected() -> bool:  # through HAProxy, once it has seen node-a pass a check
            try:
                candidate = socket.create_connection(("127.0.0.1", front), timeout=2)
            except OSError:
                return False
            if _echoes(candidate):
                session.append(candidate)
                return True
            candidate.close()
            return False

        wait_until(connected, 15, "a session through HAProxy to the master")
        late = a.hold_next(0.5)  # later than inter (100 ms), within timeout check (1 s)
        wait_until(lambda: _answered(a, late + 3), 15, "the slow check and three more")
        if recipe != "now":
            assert not _echoes(session[0]), "the old lines kept the session: the test proves less"
            return
        assert _echoes(session[0]), "one slow /master answer cut the master's session"
        timed_out = a.hold_next(1.5)  # past timeout check: one failed check of fall 2
        wait_until(lambda: _answered(a, timed_out + 3), 15, "the failed check and three more")
        assert _echoes(session[0]), "one failed /master check cut the master's session"
        session[0].close()
    finally:
        stop_process(proxy)
