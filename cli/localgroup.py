"""A group of real supervisor processes on one machine, for `primacy demo`, tests and benchmarks.

Every process started here is tracked by pid and killed by ``Group.close``.
Status endpoints listen on loopback ports found free below the kernel's ephemeral range.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Below the ephemeral range (Linux's default starts at 32768), how many ports to draw from.
_PORTS_BELOW_EPHEMERAL = 12_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# A port handed out is skipped by every other caller on this machine for this long: the
# server it is for may bind it only much later (a slave binds STOMP when promoted).
_RESERVED_FOR_S = 900.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing on ``host`` uses now, for a server started next: taken by whoever
    binds it first.

    Drawn at random from below the kernel's ephemeral range: the kernel gives those to
    every outgoing connection (and to ``bind(0)``), so a port it picked could be taken
    by some client's connection before the server starts and binds it (a node failing
    with "Address already in use"). Below the range only another caller of this
    function can take it, and each port handed out is reserved for a quarter of an hour
    (``_reserve``): two test workers once drew the same port, one for a slave that binds
    STOMP only when promoted, and the other bound it first."""
    try:
        first_ephemeral = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32_768
    low = max(1_024, first_ephemeral - _PORTS_BELOW_EPHEMERAL)
    draw = random.SystemRandom()
    for _ in range(100):
        port = draw.randrange(low, first_ephemeral)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue  # in use: draw again
        if _reserve(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # all taken: the kernel's
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _reserve(port: int) -> bool:
    """Claim ``port`` for ``_RESERVED_FOR_S`` among the callers of ``free_port`` on this
    machine (a file per port, created exclusively, in a directory of this user's own);
    False if another caller holds it. Where no claim can be written, the draw alone decides."""
    directory = Path(tempfile.gettempdir()) / f"primacy-free-ports-{os.getuid()}"
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        info = directory.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return True  # not ours (planted in a shared /tmp): no reservations
        claim = directory / str(port)
        with contextlib.suppress(FileNotFoundError):
            if time.time() - claim.lstat().st_mtime < _RESERVED_FOR_S:
                return False
            # A stale claim: whoever renames it away first may claim the port again.
            os.rename(claim, directory / f"{port}.stale.{os.getpid()}")
            os.unlink(directory / f"{port}.stale.{os.getpid()}")
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
        return True
    except FileExistsError:
        return False  # another caller claimed it just now
    except OSError:
        return True


def http_status(
    port: int, path: str, timeout_s: float = 1.0, host: str = "127.0.0.1"
) -> int | None:
    """The status code of GET path on host:port, or None if nothing answers."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


@dataclass
class NodeProcess:
    node_id: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def status(self, path: str = "/master", timeout_s: float = 1.0) -> int | None:
        return http_status(self.port, path, timeout_s)

    def is_master(self) -> bool:
        return self.status("/master") == 200

    def answers_health(self) -> bool:
        """/health answers 200; AssertionError at once, with the log's end, if it exited."""
        if self.process.poll() is not None:
            raise AssertionError(
                f"{self.node_id} exited ({self.process.returncode}) before answering /health: "
                f"{self.log()[-1500:]}"
            )
        return self.status("/health") == 200

    def signal(self, sig: int) -> None:
        """Send ``sig``; a SIGKILL returns once the process is gone. A killed process's
        descriptors close before it can be reaped, so its guardian (and a test watching its
        children) can see it dead while ``alive()`` still says otherwise."""
        if self.process.poll() is None:
            os.kill(self.pid, sig)
            if sig == signal.SIGKILL:
                self.process.wait(30)

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """SIGSTOP for the ``with`` block, SIGCONT after it, however it ends."""
        self.signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.signal(signal.SIGCONT)

    def alive(self) -> bool:
        return self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@dataclass
class Group:
    """A group of nodes sharing ``share``; logs go to ``log_dir``."""

    share: Path
    log_dir: Path
    common_args: Sequence[str] = ()
    nodes: dict[str, NodeProcess] = field(default_factory=dict)
    every_process: list[NodeProcess] = field(default_factory=list)

    def start(
        self,
        node_id: str,
        *extra: str,
        exec_command: Sequence[str] | None = None,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        http_port: int | None = None,
        share: Path | None = None,
    ) -> NodeProcess:
        """``share``: this node's own path to the group's share (its host's mount), if not
        ``self.share``."""
        port = http_port or free_port()
        log_path = self.log_dir / f"{node_id}.log"
        args = [
            sys.executable,
            "-m",
            "primacy.cli",
            "run",
            "--node-id",
            node_id,
            "--share",
            str(share or self.share),
            "--http",
            f"127.0.0.1:{port}",
            *self.common_args,
            *extra,
        ]
        if exec_command:
            args += ["--exec", "--", *exec_command]
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(
                args,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                preexec_fn=preexec_fn,  # e.g. a resource limit the node must live with
            )
        node = NodeProcess(node_id, port, process, log_path)
        self.nodes[node_id] = node
        self.every_process.append(node)
        return node

    def start_many(self, count: int, *extra: str) -> list[NodeProcess]:
        started = [self.start(f"n{index}", *extra) for index in range(1, count + 1)]
        for node in started:
            wait_until(
                lambda node=node: node.answers_health(),
                20,
                f"{node.node_id} answers /health",
            )
        return started

    def alive(self) -> list[NodeProcess]:
        return [node for node in self.nodes.values() if node.alive()]

    def masters(self, nodes: Iterable[NodeProcess] | None = None) -> list[NodeProcess]:
        return [node for node in (nodes or self.alive()) if node.is_master()]

    def wait_for_master(self, timeout_s: float = 15.0, exclude: Iterable[str] = ()) -> NodeProcess:
        excluded = set(exclude)
        found: list[NodeProcess] = []

        def one_master() -> bool:
            found[:] = [n for n in self.masters() if n.node_id not in excluded]
            return len(found) == 1

        wait_until(one_master, timeout_s, "exactly one master")
        return found[0]

    def close(self) -> None:
        for node in self.every_process:
            node.signal(signal.SIGKILL)
        for node in self.every_process:
            try:
                node.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def wait_until(condition: object, timeout_s: float, what: str, interval_s: float = 0.02) -> None:
    deadline = time.monotonic() + timeout_s
    assert callable(condition)
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)
