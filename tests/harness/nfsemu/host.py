"""The test-side controller of one emulated host: start its daemon, cut and heal its link, stop it.

    host = EmulatedHost.start(backing, mountpoint, lease_s=1.0)
    host.partition("hang")   # or "eio"
    host.heal()
    host.stop()              # always: unmount, kill by pid

``host.mountpoint`` is the share path a process on that host uses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from tests.harness.nfsemu import control

_REPO_ROOT = Path(__file__).resolve().parents[3]
_MOUNT_WAIT_S = 15.0
_EXIT_WAIT_S = 5.0


def is_mounted(mountpoint: Path) -> bool:
    """True if ``mountpoint`` is in this mount namespace's table (never touches the mount)."""
    target = os.path.realpath(mountpoint)
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        for line in table:
            fields = line.split()
            # Field 5 is the mount point, with spaces and such escaped as \040.
            if fields[4].encode().decode("unicode_escape") == target:
                return True
    return False


def unmount_lazily(mountpoint: Path) -> None:
    if is_mounted(mountpoint):
        # Lazy: processes may still have files open on the mount (a hung supervisor);
        # they get errors once the daemon is gone.
        subprocess.run(
            ["fusermount3", "-u", "-z", str(mountpoint)],
            capture_output=True,
            timeout=10,
            check=False,
        )


class MountedHost(Protocol):
    """A host's FUSE daemon, as ``wait_until_mounted`` sees it (the emulator's or the real
    NFS tier's)."""

    mountpoint: Path
    process: subprocess.Popen[bytes]

    def answers(self) -> bool: ...

    def log(self) -> str: ...


def wait_until_mounted(host: MountedHost, daemon: str, timeout_s: float = _MOUNT_WAIT_S) -> None:
    """Until the host's share is mounted and its daemon answers; its log if it exits first."""
    deadline = time.monotonic() + timeout_s
    while not (is_mounted(host.mountpoint) and host.answers()):
        if host.process.poll() is not None:
            raise RuntimeError(
                f"the {daemon} daemon for {host.mountpoint} exited with "
                f"{host.process.returncode}:\n{host.log()[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"{host.mountpoint} not mounted after {timeout_s} s")
        time.sleep(0.02)


@dataclass
class EmulatedHost:
    """One host's view of the share: a FUSE mount served by its own daemon process."""

    backing: Path
    mountpoint: Path
    lease_s: float
    control_name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def share(self) -> Path:
        """The path a supervisor on this host is given as its share."""
        return self.mountpoint

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    def start(
        cls,
        backing: Path,
        mountpoint: Path,
        lease_s: float = 1.0,
        *,
        log_path: Path | None = None,
        debug: bool = False,
    ) -> EmulatedHost:
        """Start the daemon and return once the mount answers; on failure nothing is left."""
        backing, mountpoint = Path(backing), Path(mountpoint)
        mountpoint.mkdir(parents=True, exist_ok=True)
        log_path = log_path or mountpoint.with_name(mountpoint.name + ".nfsemu.log")
        name = f"nfsemu-{uuid.uuid4().hex[:12]}"
        command = [
            sys.executable,
            "-m",
            "tests.harness.nfsemu.daemon",
            "--backing",
            str(backing),
            "--mountpoint",
            str(mountpoint),
            "--control",
            name,
            "--lease-s",
            str(lease_s),
            *(["--debug"] if debug else []),
        ]
        python_path = [str(_REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(python_path)}
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(
                command,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=_REPO_ROOT,
                env=env,
            )
        try:
            host = cls(backing, mountpoint, lease_s, name, process, log_path)
        except BaseException:  # nothing to call stop() on: undo what it would by hand
            process.kill()
            process.wait()
            unmount_lazily(mountpoint)
            raise
        try:
            host._wait_until_mounted()
        except BaseException:
            host.stop()
            raise
        return host

    def _wait_until_mounted(self) -> None:
        wait_until_mounted(self, "nfsemu")

    def answers(self) -> bool:
        """Whether the daemon answers on its control socket."""
        try:
            self.status()
        except OSError:
            return False
        return True

    # --- faults ---------------------------------------------------------------

    def partition(self, mode: Literal["eio", "hang"]) -> dict[str, Any]:
        """Cut this host off the server: operations fail with EIO or hang until heal."""
        if mode not in ("eio", "hang"):
            raise ValueError(f"partition mode must be 'eio' or 'hang', not {mode!r}")
        return self._command(f"partition-{mode}")

    def heal(self) -> dict[str, Any]:
        """Reconnect: deferred unlocks and closes run, then operations resume."""
        return self._command("heal")

    def expire_lease(self) -> dict[str, Any]:
        """Expire the lease of the running partition now instead of after ``lease_s``."""
        return self._command("expire")

    def slow_fsync(self, delay_ms: float) -> dict[str, Any]:
        """Delay every fsync and fdatasync through this mount by ``delay_ms``."""
        return self._command(f"slow-fsync {delay_ms}")

    def eio_under(self, prefix: str) -> dict[str, Any]:
        """Fail every operation on a path under ``prefix`` (e.g. ``/journal``) with EIO."""
        return self._command(f"eio-path {prefix}")

    def clear_faults(self) -> dict[str, Any]:
        """End the per-path faults (slow fsync, EIO under a prefix)."""
        return self._command("clear-faults")

    def status(self) -> dict[str, Any]:
        """Mode, lease state and lock/handle counts, as the daemon sees them."""
        return self._command("status")

    def _command(self, command: str) -> dict[str, Any]:
        return control.send(self.control_name, command)

    # --- lifetime -------------------------------------------------------------

    def fail_all(self) -> None:
        """From now on every operation fails with EIO, and every hung one returns.

        Call before killing processes that use the mount: a process blocked in
        a hung FUSE request cannot die, even from SIGKILL, until it is answered.
        """
        if self.process.poll() is None:
            try:
                control.send(self.control_name, "shutdown", timeout_s=1.0)
            except (OSError, RuntimeError):
                pass

    def stop(self) -> None:
        """Fail all pending operations, unmount, and kill the daemon by pid. Idempotent."""
        self.fail_all()
        unmount_lazily(self.mountpoint)
        try:
            self.process.wait(timeout=_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.process.wait(timeout=_EXIT_WAIT_S)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> EmulatedHost:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
