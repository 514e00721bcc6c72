"""When an exec child counts as ready to serve: a TCP port, a command, or its own READY=1.

A JVM broker accepts connections seconds after it starts; until its check
passes, the node answers 503 on ``/master`` so a load balancer sends nobody to
a port that refuses them. Every check here is polled by the child's thread and
never blocks it for long (a command runs in the background between polls).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Protocol

from primacy.supervisor.config import NodeConfig
from primacy.supervisor.config.listen_addresses import parse_host_port

# How long one TCP connection attempt may take, and how often a command is run.
_CONNECT_TIMEOUT_S = 0.2
COMMAND_INTERVAL_S = 0.5


class ReadyCheck(Protocol):
    description: str

    def environment(self) -> dict[str, str]:
        """What the child's environment needs for this check."""

    def passed(self, now: float) -> bool:
        """Whether the child is ready now; ``now`` is ``time.monotonic``."""

    def forget(self) -> None:
        """Discard what the child said so far (behind a warm standby's closed gate)."""

    def close(self) -> None: ...


class TcpReady:
    """Ready once HOST:PORT accepts a connection."""

    def __init__(self, address: str) -> None:
        self.description = f"tcp:{address}"
        self._host, self._port = parse_host_port(address)

    def environment(self) -> dict[str, str]:
        return {}

    def passed(self, now: float) -> bool:
        try:
            with socket.create_connection((self._host, self._port), timeout=_CONNECT_TIMEOUT_S):
                return True
        except OSError:
            return False

    def forget(self) -> None:
        pass

    def close(self) -> None:
        pass


class CommandReady:
    """Ready once a shell command exits 0; run again every ``COMMAND_INTERVAL_S``."""

    def __init__(self, command: str) -> None:
        self.description = f"command {command!r}"
        self._command = command
        self._running: subprocess.Popen[bytes] | None = None
        self._next_run = 0.0

    def environment(self) -> dict[str, str]:
        return {}

    def passed(self, now: float) -> bool:
        if self._running is not None:
            code = self._running.poll()
            if code is None:
                return False
            self._running = None
            if code == 0:
                return True
        if now >= self._next_run:
            self._next_run = now + COMMAND_INTERVAL_S
            self._running = subprocess.Popen(
                ["sh", "-c", self._command], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
            )
        return False

    def forget(self) -> None:
        self.close()
        self._next_run = 0.0

    def close(self) -> None:
        if self._running is not None:
            self._running.kill()
            self._running.wait()
            self._running = None


class NotifyReady:
    """Ready once the child sends ``READY=1`` to the ``NOTIFY_SOCKET`` given to it (sd_notify)."""

    description = "READY=1 on NOTIFY_SOCKET"

    def __init__(self) -> None:
        self._directory = Path(tempfile.mkdtemp(prefix="primacy-notify-"))  # mode 700
        self._path = self._directory / "notify"
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(str(self._path))
        self._socket.setblocking(False)

    def environment(self) -> dict[str, str]:
        return {"NOTIFY_SOCKET": str(self._path)}

    def passed(self, now: float) -> bool:
        while True:
            try:
                datagram = self._socket.recv(4096)
            except BlockingIOError:
                return False
            if b"READY=1" in datagram.split(b"\n"):
                return True

    def forget(self) -> None:
        while self.passed(0.0):
            pass

    def close(self) -> None:
        self._socket.close()
        shutil.rmtree(self._directory, ignore_errors=True)


def ready_check(config: NodeConfig) -> ReadyCheck | None:
    """The check ``exec_ready`` or ``exec_ready_cmd`` asks for; None: ready once started."""
    if config.exec_ready_cmd is not None:
        return CommandReady(config.exec_ready_cmd)
    if config.exec_ready == "notify":
        return NotifyReady()
    if config.exec_ready is not None:
        return TcpReady(config.exec_ready.removeprefix("tcp:"))
    return None


def ready_wait(config: NodeConfig) -> str | None:
    """What a master with a just-started child waits for before it answers 200 on /master."""
    if config.exec_ready_cmd is not None:
        return f"the exec child's readiness check (command {config.exec_ready_cmd!r})"
    if config.exec_ready is not None:
        check = "READY=1 on NOTIFY_SOCKET" if config.exec_ready == "notify" else config.exec_ready
        return f"the exec child's readiness check ({check})"
    return None
