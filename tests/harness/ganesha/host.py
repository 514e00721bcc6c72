"""Hosts on the real NFSv4 server: each a FUSE daemon in its own network namespace.

``RealNfsHosts`` is the real server's counterpart of ``EmulatedHosts``
(``tests/harness/emulated_hosts.py``), with the same calls, so
``EmulatedGroup`` and the scenario helpers run on either: ``hosts(count)``
starts hosts, ``start_node(host, node_id)`` starts a supervisor on one,
``backing`` is the share as the server stores it, ``close()`` tears it all
down by pid. A host's faults are the real ones: ``partition()`` cuts its link
(nft drop), ``freeze()`` stops its client (SIGSTOP of its daemon: the host's
kernel stops renewing), ``crash()`` kills its client without unlocking
anything.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.emulated_hosts import HostsWithNodes
from tests.harness.ganesha.server import GaneshaServer, Link
from tests.harness.nfsemu import control
from tests.harness.nfsemu.host import unmount_lazily, wait_until_mounted

_REPO_ROOT = Path(__file__).resolve().parents[3]
_MOUNT_WAIT_S = 20.0
_EXIT_WAIT_S = 5.0


@dataclass
class RealNfsHost:
    """One host: its namespace and link, and the daemon that mounts the share through libnfs."""

    name: str
    link: Link
    mountpoint: Path
    control_name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    command: list[str]

    @property
    def share(self) -> Path:
        return self.mountpoint

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    def start(
        cls, server: GaneshaServer, name: str, mountpoint: Path, log_path: Path, timeout_ms: int
    ) -> RealNfsHost:
        link = server.add_link(name)
        mountpoint.mkdir(parents=True, exist_ok=True)
        control_name = str(log_path.with_suffix(".sock"))
        command = [
            "nsenter",
            f"--net={link.netns_path}",
            sys.executable,
            "-m",
            "tests.harness.ganesha.daemon",
            "--server",
            link.server_address,
            "--host-name",
            f"{server.id}-{name}",
            "--mountpoint",
            str(mountpoint),
            "--control",
            control_name,
            "--lease-s",
            str(server.lease_s),
            "--timeout-ms",
            str(timeout_ms),
        ]
        host = cls(
            name, link, mountpoint, control_name, _spawn(command, log_path), log_path, command
        )
        try:
            host._wait_until_mounted()
        except BaseException:
            host.stop()
            raise
        return host

    def _wait_until_mounted(self) -> None:
        wait_until_mounted(self, "nfsreal", _MOUNT_WAIT_S)

    def answers(self) -> bool:
        """Whether the daemon answers on its control socket."""
        try:
            self.status()
        except OSError:
            return False
        return True

    # --- faults ---------------------------------------------------------------

    def partition(self, mode: str = "hang") -> None:
        """Cut this host's link: the server hears nothing, calls time out (a soft mount)."""
        self.link.cut()

    def heal(self) -> None:
        self.link.heal()

    def freeze(self) -> None:
        """Stop the host's NFS client (its daemon): nothing is renewed, every call waits."""
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def crash(self) -> None:
        """The host's NFS client vanishes: killed by pid, no unlock, no close reaches the server.

        Its processes on the mount see ENOTCONN from then on, as a crashed
        host's processes see nothing at all.
        """
        self.thaw()
        self.process.kill()
        self.process.wait(timeout=_EXIT_WAIT_S)

    def restart(self) -> None:
        """The host boots again: a new client (new NFSv4 client id) mounts the share."""
        self.stop()
        self.process = _spawn(self.command, self.log_path)
        self._wait_until_mounted()

    def slow_replies(self, delay_ms: float) -> dict[str, Any]:
        """Every call of this host answered ``delay_ms`` late: a slow server (or path to it)."""
        return control.send(self.control_name, f"slow-fsync {delay_ms}")

    def clear_faults(self) -> dict[str, Any]:
        self.heal()
        return control.send(self.control_name, "clear-faults")

    def status(self) -> dict[str, Any]:
        return control.send(self.control_name, "status")

    # --- lifetime -------------------------------------------------------------

    def fail_all(self) -> None:
        """Let every waiting call end: calls time out (soft mount), a frozen client resumes."""
        self.heal()
        if self.process.poll() is None:
            self.thaw()

    def stop(self) -> None:
        """Unmount and kill the daemon by pid. Idempotent."""
        self.fail_all()
        unmount_lazily(self.mountpoint)
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=_EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=_EXIT_WAIT_S)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def _spawn(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    python_path = [str(_REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(python_path)}
    with open(log_path, "ab") as log_file:
        return subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=_REPO_ROOT,
            env=env,
        )


class RealNfsHosts(HostsWithNodes[RealNfsHost]):
    """Hosts on one ganesha server, and supervisor nodes on their mounts (cf. ``EmulatedHosts``)."""

    def __init__(self, root: Path, server: GaneshaServer, timeout_ms: int = 2000) -> None:
        super().__init__(root)
        self.server = server
        self.timeout_ms = timeout_ms

    @property
    def backing(self) -> Path:
        return self.server.share

    def __call__(self, count: int, lease_s: float | None = None) -> list[RealNfsHost]:
        """Start ``count`` more hosts. The lease is the server's (``lease_s`` is ignored)."""
        started = []
        for _ in range(count):
            name = chr(ord("a") + len(self.hosts))
            host = RealNfsHost.start(
                self.server,
                name,
                self.root / "hosts" / name,
                self.root / f"nfsreal-{name}.log",
                self.timeout_ms,
            )
            self.hosts.append(host)
            started.append(host)
        return started
