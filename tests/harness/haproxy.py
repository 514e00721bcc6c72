"""A real Debian ``haproxy`` process on loopback for the tests and benchmarks: started from a
config text with a runtime API (stats socket, level admin) on a free TCP port and a unix
socket, asked for its servers' states, stopped by pid."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

from primacy.cli.localgroup import free_port, wait_until
from primacy.supervisor.shell.haproxy_api import RuntimeApi, RuntimeApiError, is_ready

HAPROXY = shutil.which("haproxy")


class Haproxy:
    """One HAProxy; ``config`` is everything but the ``global`` section, which this adds."""

    def __init__(self, directory: Path, config: str, extra_global: str = "") -> None:
        assert HAPROXY is not None
        self.api_port = free_port()
        self.socket_path = directory / "haproxy-admin.sock"
        self.config_path = directory / "haproxy.cfg"
        self.log_path = directory / "haproxy.log"
        self.config_path.write_text(
            "global\n"
            f"    stats socket ipv4@127.0.0.1:{self.api_port} level admin\n"
            f"    stats socket {self.socket_path} mode 600 level admin\n"
            "    log stderr local0 info\n"
            f"{extra_global}"
            "defaults\n"
            "    log global\n"
            f"{config}"
        )
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(self.config_path)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.api = RuntimeApi(f"127.0.0.1:{self.api_port}")
        wait_until(self._answers, 15, "HAProxy's runtime API to answer")

    @property
    def tcp_address(self) -> str:
        return f"127.0.0.1:{self.api_port}"

    @property
    def unix_address(self) -> str:
        return f"unix:{self.socket_path}"

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"haproxy exited: {self.log()}")
        try:
            self.api.send("show info", 1.0)
        except RuntimeApiError:
            return False
        return True

    def states(self, backend: str) -> dict[str, tuple[int, int]]:
        """``show servers state``: server -> (operational, admin) state."""
        return self.api.servers(backend, 2.0)

    def ready(self, backend: str) -> set[str]:
        """The servers HAProxy would send a new connection to."""
        return {name for name, state in self.states(backend).items() if is_ready(*state)}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.process)
        self._log.close()


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 10 s (an HAProxy the test started)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
