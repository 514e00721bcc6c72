"""The control channel of one emulator daemon: a Unix socket outside the mount.

The socket lives in Linux's abstract namespace (no file to clean up, no path
length limit), named by the controller, e.g. ``nfsemu-1f2e3d4c5b6a``. It is
outside the mount on purpose: a hung mount must still be healable. One command
per connection, one line each way:

    partition-eio | partition-hang | heal | expire | status | shutdown
    | slow-fsync MS | eio-path PREFIX | clear-faults
    -> {"ok": true, "mode": "...", ...}      (JSON)

From a shell: ``echo heal | socat - ABSTRACT-CONNECT:nfsemu-1f2e3d4c5b6a``, or
``python -m tests.harness.nfsemu.control nfsemu-1f2e3d4c5b6a heal``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

COMMANDS = (
    "partition-eio",
    "partition-hang",
    "heal",
    "expire",
    "status",
    "shutdown",
    "clear-faults",
)
# Commands that take one argument after a space.
COMMANDS_WITH_ARGUMENT = ("slow-fsync", "eio-path")
_MAX_LINE_BYTES = 4096


def _address(name: str) -> str:
    # A path is a socket file: abstract names belong to a network namespace,
    # and the real-NFS tier's daemons run in their hosts' own namespaces.
    return name if name.startswith("/") else "\0" + name


def send(name: str, command: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """Send one command to the daemon listening on ``name``; return its JSON answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(_address(name))
        sock.sendall(command.encode() + b"\n")
        answer = sock.makefile("rb").readline(_MAX_LINE_BYTES)
    if not answer:
        raise ConnectionError(f"the nfsemu daemon on {name!r} closed without answering")
    result: dict[str, Any] = json.loads(answer)
    if not result.get("ok"):
        raise RuntimeError(f"nfsemu {command!r} failed: {result.get('error')}")
    return result


class ControlServer:
    """Accepts commands on the abstract socket and hands each to ``handle`` on its own thread."""

    def __init__(self, name: str, handle: Callable[[str], dict[str, Any]]) -> None:
        self._handle = handle
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if name.startswith("/") and os.path.exists(name):
            os.unlink(name)  # left by this host's previous daemon (killed: a host crash)
        self._sock.bind(_address(name))
        self._sock.listen(16)
        # A daemon thread: the process ends when FUSE's loop returns, and
        # nothing here owns state that needs an orderly stop.
        self._thread = threading.Thread(target=self._serve, name="nfsemu-control", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _serve(self) -> None:
        while True:
            connection, _ = self._sock.accept()
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            line = connection.makefile("rb").readline(_MAX_LINE_BYTES).decode().strip()
            try:
                if not is_command(line):
                    raise ValueError(
                        f"unknown command {line!r}; expected one of {COMMANDS} "
                        f"or one of {COMMANDS_WITH_ARGUMENT} with an argument"
                    )
                reply = {"ok": True, **self._handle(line)}
            except Exception as exc:  # answered to the controller, never raised in the daemon
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            connection.sendall(json.dumps(reply).encode() + b"\n")


def is_command(line: str) -> bool:
    name, _, argument = line.partition(" ")
    return line in COMMANDS or (name in COMMANDS_WITH_ARGUMENT and bool(argument.strip()))


def main(argv: list[str]) -> int:
    command = " ".join(argv[1:])
    if len(argv) < 2 or not is_command(command):
        every = "|".join((*COMMANDS, *(f"{c} ARG" for c in COMMANDS_WITH_ARGUMENT)))
        print(f"usage: python -m tests.harness.nfsemu.control NAME {{{every}}}")
        return 2
    print(json.dumps(send(argv[0], command)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
