"""HAProxy's runtime API (its stats socket at ``level admin``): the commands a push sends.

A push marks servers up or down with ``set server BACKEND/SERVER health up|down``: a
forced health that HAProxy's next health check overrides, so the check stays the
backstop (docs/safety.md, "Load balancers told by push"). ``state maint`` is never sent:
it stops the checks, so a lost push would keep a server out for good, and it is the
operator's own switch. One command line per connection (HAProxy's non-interactive
mode: it answers and closes); commands joined by ``;`` run in their order.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

# srv_op_state of ``show servers state``: 0 stopped, 1 starting, 2 running, 3 stopping.
RUNNING = 2
_MAX_ANSWER_BYTES = 1 << 20


class RuntimeApiError(Exception):
    """HAProxy could not be reached, or answered a command with an error."""


class Refused(RuntimeApiError):
    """HAProxy answered, with an error (an unknown backend or server, a socket not at level
    admin): what the operator must fix in HAProxy's or the node's configuration."""


@dataclass(frozen=True)
class RuntimeApi:
    """One HAProxy's runtime API: ``unix:/path`` (or ``/path``) or ``HOST:PORT``."""

    address: str

    def family_and_target(self) -> tuple[socket.AddressFamily, str | tuple[str, int]]:
        if self.address.startswith("unix:"):
            return socket.AF_UNIX, self.address.removeprefix("unix:")
        if self.address.startswith("/"):
            return socket.AF_UNIX, self.address
        host, _, port = self.address.rpartition(":")
        return socket.AF_INET, (host.strip("[]"), int(port))

    def send(self, line: str, timeout_s: float) -> str:
        """Send one command line, return HAProxy's whole answer (it closes after answering)."""
        family, target = self.family_and_target()
        try:
            if family == socket.AF_UNIX:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(timeout_s)
                sock.connect(target)
            else:
                assert isinstance(target, tuple)
                sock = socket.create_connection(target, timeout=timeout_s)
            with sock:
                sock.sendall(line.encode() + b"\n")
                sock.shutdown(socket.SHUT_WR)
                chunks: list[bytes] = []
                received = 0
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
                    received += len(chunk)
                    if received > _MAX_ANSWER_BYTES:
                        raise RuntimeApiError(f"{self.address}: an answer over 1 MiB")
        except OSError as exc:
            raise RuntimeApiError(f"{self.address}: {exc}") from exc
        return b"".join(chunks).decode(errors="replace")

    def servers(self, backend: str, timeout_s: float) -> dict[str, tuple[int, int]]:
        """Every server of ``backend``: name -> (srv_op_state, srv_admin_state)."""
        answer = self.send(f"show servers state {backend}", timeout_s)
        found = parse_servers_state(answer, backend)
        if not found and not answer.lstrip().startswith("1\n"):
            raise Refused(f"{self.address}: {first_line(answer)}")
        return found

    def run(self, commands: list[str], timeout_s: float) -> None:
        """Run ``commands`` in order on one connection; each must answer nothing."""
        answer = self.send(";".join(commands), timeout_s)
        if answer.strip():
            raise Refused(f"{self.address}: {first_line(answer)}")


def first_line(answer: str) -> str:
    return next((line for line in answer.splitlines() if line.strip()), "(no answer)")


def parse_servers_state(answer: str, backend: str) -> dict[str, tuple[int, int]]:
    """``show servers state``'s rows of ``backend`` (format version 1): name -> states."""
    found: dict[str, tuple[int, int]] = {}
    for line in answer.splitlines():
        fields = line.split()
        if len(fields) > 6 and not line.startswith("#") and fields[1] == backend:
            found[fields[3]] = (int(fields[5]), int(fields[6]))
    return found


def is_ready(op_state: int, admin_state: int) -> bool:
    """The server takes new connections: running, and no admin flag (maintenance or drain of
    any origin) set."""
    return op_state == RUNNING and admin_state == 0


def commands(backend: str, server: str, serving: bool, servers: list[str]) -> list[str]:
    """What a node tells HAProxy. Serving: every other server of the backend down first, then
    its own up (one line, run in order: never two up because of the push). Not serving: its
    own down."""
    if not serving:
        return [f"set server {backend}/{server} health down"]
    others = [f"set server {backend}/{name} health down" for name in servers if name != server]
    return [*others, f"set server {backend}/{server} health up"]
