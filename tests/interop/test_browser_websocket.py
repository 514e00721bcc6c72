"""STOMP over WebSocket as browser applications use it: @stomp/stompjs in a real headless
browser (Debian's chromium) against two real nodes, through a SIGKILL of the master; and a
Python WebSocket client (the ``websockets`` library's) against a real node.

The page (``stompjs_failover.html``) is served here, with the library's bundle from
``node_modules`` (pinned by package-lock.json; ``.ci/setup dev`` runs ``npm ci``), and tells
the test what it sees by POSTing JSON back to the same server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from websockets.sync.client import connect

from primacy.broker import codes
from tests.harness.group import Group, NodeProcess, free_port, wait_until

HERE = Path(__file__).parent
BUNDLE = HERE / "node_modules" / "@stomp" / "stompjs" / "bundles" / "stomp.umd.min.js"
PAGE = HERE / "stompjs_failover.html"


class PageServer:
    """Serves the page and the bundle; keeps every report the page POSTs, in order."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        files = {"/stompjs_failover.html": PAGE, "/stomp.umd.min.js": BUNDLE}
        reports = self.reports

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = files.get(self.path.split("?")[0])
                if found is None:
                    self.send_error(404)
                    return
                body = found.read_bytes()
                self.send_response(200)
                kind = "text/html" if found.suffix == ".html" else "text/javascript"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                reports.append(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def last(self, kind: str) -> dict[str, Any] | None:
        """The page's latest report of this kind, without its ``seq``."""
        found = [report for report in self.reports if report["kind"] == kind]
        if not found:
            return None
        return {k: v for k, v in max(found, key=lambda r: r["seq"]).items() if k != "seq"}

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        """Wait for what the page reports; on a timeout, say everything it reported."""
        try:
            wait_until(condition, 60, what)
        except AssertionError as timeout:
            raise AssertionError(f"{timeout}; the page reported: {self.reports}") from None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def page_server() -> Iterator[PageServer]:
    server = PageServer()
    try:
        yield server
    finally:
        server.close()


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Debian's chromium is not installed (bash .ci/setup dev installs it as root)")
    if not BUNDLE.is_file():
        pytest.skip("@stomp/stompjs is not installed (cd tests/interop && npm ci)")
    return found


def _start(group: Group, name: str, stomp: int, websocket: int) -> NodeProcess:
    return group.start(
        name, "--stomp", f"127.0.0.1:{stomp}", "--stomp-websocket", f"127.0.0.1:{websocket}"
    )


@pytest.mark.slow
def test_stompjs_in_a_browser_gets_every_receipted_message_through_a_failover(
    group: Group, page_server: PageServer, tmp_path: Path
) -> None:
    browser = _chromium()
    websockets = {name: free_port() for name in ("a", "b")}
    nodes = {name: _start(group, name, free_port(), port) for name, port in websockets.items()}
    first = group.wait_for_master(30)
    survivor = nodes["b" if first.node_id == "a" else "a"]
    wait_until(lambda: survivor.status("/slave") == 200, 30, "the other node a slave")
    with socket.socket() as probe:  # a slave does not listen for WebSocket clients either
        assert probe.connect_ex(("127.0.0.1", websockets[survivor.node_id])) != 0
    urls = [f"ws://127.0.0.1:{port}/stomp" for port in websockets.values()]
    page = (
        f"http://127.0.0.1:{page_server.port}/stompjs_failover.html?urls={quote(json.dumps(urls))}"
    )
    chromium = subprocess.Popen(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", page],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "chromium.log").open("wb"),
        start_new_session=True,
    )  # fmt: skip
    try:

        def receipted() -> list[str]:
            report = page_server.last("receipted")
            return report["receipted"] if report else []

        page_server.wait(lambda: len(receipted()) == 20, "20 receipts")
        assert page_server.last("connected") == {
            "kind": "connected",
            "url": f"ws://127.0.0.1:{websockets[first.node_id]}/stomp",
            "connections": 1,
            "version": "1.2",
            "subprotocol": "v12.stomp",
        }
        first.signal(signal.SIGKILL)
        first.process.wait(30)

        def received() -> list[str]:
            report = page_server.last("received")
            return report["received"] if report else []

        page_server.wait(
            lambda: len(receipted()) == 25 and set(received()) >= set(receipted()),
            "every receipted message received after the failover",
        )
    finally:
        os.killpg(chromium.pid, signal.SIGKILL)
        chromium.wait(30)
    again = page_server.last("connected")
    assert again is not None
    assert again["url"] == f"ws://127.0.0.1:{websockets[survivor.node_id]}/stomp", again
    assert sorted(received()) == sorted(receipted()), "each message once, none lost"
    assert page_server.last("error") is None, page_server.reports


def test_a_python_websocket_client_on_a_real_node_until_it_stops_serving(group: Group) -> None:
    websocket = free_port()
    node = _start(group, "a", free_port(), websocket)
    group.wait_for_master(30)
    offered = ["v10.stomp", "v11.stomp", "v12.stomp"]
    with connect(f"ws://127.0.0.1:{websocket}/", subprotocols=offered) as ws:  # type: ignore[arg-type]
        assert ws.subprotocol == "v12.stomp"
        ws.send("CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
        assert str(ws.recv(10)).startswith("CONNECTED\nversion:1.2\n")
        ws.send("SEND\ndestination:/queue/py\nreceipt:r\n\nhello\x00")
        assert ws.recv(10) == "RECEIPT\nreceipt-id:r\n\n\x00"
        ws.send("SUBSCRIBE\ndestination:/queue/py\nid:0\n\n\x00")
        message = str(ws.recv(10))
        assert message.startswith("MESSAGE\n") and message.endswith("\n\nhello\x00"), message
        node.signal(signal.SIGTERM)  # it stops serving, as at demotion: every client is told
        error = str(ws.recv(30))
        assert error.startswith(f"ERROR\nmessage:{codes.SHUTTING_DOWN} "), error
