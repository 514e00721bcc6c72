"""nfs-ganesha in a network namespace, and hosts that reach it over links a test can cut.

    server = GaneshaServer.start(root, lease_s=4, grace_s=0)
    link = server.add_link("a")   # namespace nfsr-<id>-a, veth to the server's namespace
    link.cut(); link.heal()       # nft drop of everything in and out of the host
    server.restart(grace_s=5)     # kill -9 and start again, with or without a grace period
    server.close()                # kill by pid, delete every namespace it made

The server's namespace has no route to anything else: ganesha serves only the
hosts' veth links. Each host's namespace holds only its end of its link, so a
cut host cannot reach the server by another way. Namespaces are named after a
random id, so two test workers never share one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.harness.ganesha.client import RENEW_DIR, SHARE_DIR

_START_WAIT_S = 20.0
# The tests' lease: short, so an expiry costs seconds, yet twice the nfs4
# profile's 2 s keepalive, so a master's lease checks renew it in time.
DEFAULT_LEASE_S = 4
NFS_PORT = 2049


def real_nfs_unavailable_reason() -> str | None:
    """Why the real-NFS tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "the real-NFS tests need root (network namespaces, FUSE mounts)"
    if not Path("/dev/fuse").exists():
        return "/dev/fuse is missing (run with --device /dev/fuse)"
    for tool in ("/usr/bin/ganesha.nfsd", "/usr/sbin/nft"):
        if not Path(tool).exists():
            return f"{tool} is missing: run .ci/setup dev (nfs-ganesha-vfs, libnfs13, nftables)"
    try:
        import ctypes

        ctypes.CDLL("libnfs.so.13")
    except OSError:
        return "libnfs.so.13 is missing: run .ci/setup dev (libnfs13)"
    probe = f"nfsr-probe-{uuid.uuid4().hex[:8]}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _ip("netns", "delete", probe, check=False)
    return None


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return result


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run("ip", *args, check=check)


def _in(namespace: str, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run("ip", "netns", "exec", namespace, *command, check=check)


_CONFIG = """\
NFS_CORE_PARAM {{
    Protocols = 4;
    NFS_Port = {port};
    Enable_NLM = false;
    Enable_RQUOTA = false;
}}
NFSV4 {{
    Graceless = {graceless};
    Grace_Period = {grace_s};
    Lease_Lifetime = {lease_s};
    RecoveryBackend = fs;
    RecoveryRoot = {recovery};
    Allow_Numeric_Owners = true;
    Only_Numeric_Owners = true;
}}
NFS_KRB5 {{ Active_krb5 = false; }}
EXPORT {{
    Export_Id = 1;
    Path = {export};
    Pseudo = /;
    Access_Type = RW;
    Squash = No_Root_Squash;
    Protocols = 4;
    Transports = TCP;
    SecType = sys;
    FSAL {{ Name = VFS; }}
}}
LOG {{ Default_Log_Level = EVENT; }}
"""


@dataclass
class Link:
    """One host's namespace and its veth link to the server."""

    namespace: str
    server_address: str

    @property
    def netns_path(self) -> str:
        return f"/run/netns/{self.namespace}"

    def cut(self) -> None:
        """Drop every packet in and out of the host: the server sees silence, not a reset."""
        _in(self.namespace, "nft", "add", "table", "inet", "cut")
        for hook in ("input", "output"):
            _in(
                self.namespace,
                "nft",
                f"add chain inet cut {hook} {{ type filter hook {hook} priority 0; policy drop; }}",
            )

    def heal(self) -> None:
        _in(self.namespace, "nft", "delete", "table", "inet", "cut", check=False)

    @property
    def is_cut(self) -> bool:
        found = _in(self.namespace, "nft", "list", "tables", check=False).stdout
        return "inet cut" in found


class GaneshaServer:
    """One ganesha process in its own namespace, exporting ``root/export`` (the share is in it)."""

    def __init__(self, root: Path, lease_s: int, grace_s: int) -> None:
        self.root = root
        self.lease_s = lease_s
        self.grace_s = grace_s
        self.id = uuid.uuid4().hex[:8]
        self.namespace = f"nfsr-{self.id}-srv"
        self.export = root / "export"
        self.links: dict[str, Link] = {}
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def share(self) -> Path:
        """The share as the server stores it: what the checker reads."""
        return self.export / SHARE_DIR.lstrip("/")

    @classmethod
    def start(cls, root: Path, lease_s: int = DEFAULT_LEASE_S, grace_s: int = 0) -> GaneshaServer:
        server = cls(Path(root), lease_s, grace_s)
        try:
            server.share.mkdir(parents=True, exist_ok=True)
            (server.export / RENEW_DIR.lstrip("/")).mkdir(exist_ok=True)
            _ip("netns", "add", server.namespace)
            _in(server.namespace, "ip", "link", "set", "lo", "up")
            server._start_process()
        except BaseException:
            server.close()
            raise
        return server

    def _start_process(self) -> None:
        config = self.root / "ganesha.conf"
        config.write_text(
            _CONFIG.format(
                port=NFS_PORT,
                graceless="true" if self.grace_s == 0 else "false",
                grace_s=max(self.grace_s, 1),
                lease_s=self.lease_s,
                recovery=self.root / "recovery",
                export=self.export,
            )
        )
        self.starts += 1
        log_path = self.root / "ganesha.log"
        with open(self.root / "ganesha.stdout", "ab") as out:
            self.process = subprocess.Popen(
                [
                    "nsenter",
                    f"--net=/run/netns/{self.namespace}",
                    "ganesha.nfsd",
                    "-F",  # foreground: the pid we hold is ganesha's own
                    "-L",
                    str(log_path),
                    "-f",
                    str(config),
                    "-p",
                    str(self.root / "ganesha.pid"),
                    "-N",
                    "NIV_EVENT",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + _START_WAIT_S
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"ganesha exited with {self.process.returncode}: {self.log()}")
            found = _in(self.namespace, "ss", "-Hltn", f"sport = :{NFS_PORT}", check=False)
            if found.stdout.strip():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"ganesha not listening after {_START_WAIT_S} s: {self.log()}")
            time.sleep(0.05)

    def add_link(self, host_name: str) -> Link:
        """A namespace for ``host_name`` with a veth pair to the server's namespace."""
        index = len(self.links) + 1
        namespace = f"nfsr-{self.id}-{host_name}"
        host_end, server_end = f"nh{self.id[:6]}{index}", f"ns{self.id[:6]}{index}"
        _ip("netns", "add", namespace)
        link = Link(namespace, f"10.77.{index}.1")
        self.links[host_name] = link
        _ip("link", "add", host_end, "type", "veth", "peer", "name", server_end)
        _ip("link", "set", host_end, "netns", namespace)
        _ip("link", "set", server_end, "netns", self.namespace)
        _in(self.namespace, "ip", "addr", "add", f"10.77.{index}.1/30", "dev", server_end)
        _in(self.namespace, "ip", "link", "set", server_end, "up")
        _in(namespace, "ip", "addr", "add", f"10.77.{index}.2/30", "dev", host_end)
        _in(namespace, "ip", "link", "set", host_end, "up")
        _in(namespace, "ip", "link", "set", "lo", "up")
        return link

    def kill(self) -> None:
        """The server crashes: SIGKILL, no state written, every client's TCP connection dies."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def restart(self, grace_s: int | None = None, lease_s: int | None = None) -> None:
        """Kill the server and start it again; ``grace_s`` 0 starts it graceless. A new
        ``lease_s`` is for a server no host has mounted yet (hosts renew by the old one)."""
        self.kill()
        if grace_s is not None:
            self.grace_s = grace_s
        if lease_s is not None:
            self.lease_s = lease_s
        self._start_process()

    def log(self) -> str:
        try:
            return (self.root / "ganesha.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def close(self) -> None:
        """Kill ganesha by pid and delete every namespace (their veths go with them)."""
        self.kill()
        for link in self.links.values():
            _ip("netns", "delete", link.namespace, check=False)
        _ip("netns", "delete", self.namespace, check=False)
