"""A real ZooKeeper ensemble on loopback: three servers of Debian's ``zookeeper`` package, each
with its own data directory, myid and ports, started and stopped by pid.

The servers run ``QuorumPeerMain`` from the package's jar under the JDK, not the
``zookeeperd`` service: a test owns its ensemble, kills a server (SIGKILL) or
two (quorum lost) and starts them again on the same ports and data.

They run as production ensembles do (docs/operator-guide.md, "ZooKeeper access"): a TLS
client port (Netty, PEM key and trust stores, client certificates required) beside the
plaintext one, and the digest authentication provider. ``hosts`` are the TLS ports and
``access`` the identity and certificates the group's nodes use (``node_args`` as flags);
``plain_hosts`` is for the stranger tests (anyone on the network) and the health check.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from primacy.cli.localgroup import free_port, wait_until
from primacy.share.zookeeper_access import ZooKeeperAccess
from tests.harness.jvm import SHORT_LIVED_JVM_OPTIONS
from tests.harness.tls_certs import Pki, make_pki

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# Short ticks so sessions can be short: the ensemble grants session timeouts between 2 and
# 20 ticks (0.4 s to 4 s here), and a test expires a session in seconds.
TICK_MS = 200
# The group's identity on the tests' ensembles (digest scheme).
USER, PASSWORD = "primacy", "test-password-0123456789"
# Netty (for TLS) needs its codec and resolver, which the package's jar does not list.
NETTY_JARS = ("netty-codec", "netty-resolver", "netty-transport-native-unix-common")


def unavailable_reason() -> str | None:
    """Why no ensemble can start here, or None."""
    if shutil.which("java") is None:
        return "no java on PATH: install a JDK (bash .ci/setup dev)"
    if not ZOOKEEPER_JAR.exists():
        return f"{ZOOKEEPER_JAR} is missing: install Debian's zookeeper (bash .ci/setup dev)"
    return None


@dataclass
class Server:
    myid: int
    directory: Path
    client_port: int
    quorum_port: int
    election_port: int
    secure_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """The TLS client port, what the group's nodes use."""
        return f"127.0.0.1:{self.secure_port}"

    @property
    def plain_address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def serving(self) -> bool:
        """Whether the server answers as part of a quorum (``srvr`` says its mode)."""
        try:
            with socket.create_connection(("127.0.0.1", self.client_port), timeout=1) as sock:
                sock.sendall(b"srvr")
                reply = b""
                while chunk := sock.recv(4096):
                    reply += chunk
        except OSError:
            return False
        return b"Mode: leader" in reply or b"Mode: follower" in reply


@dataclass
class Ensemble:
    """Three servers on loopback; ``hosts`` is the connection string nodes are given."""

    root: Path
    size: int = 3
    servers: list[Server] = field(default_factory=list)
    pki: Pki = field(init=False)
    credentials_file: Path = field(init=False)

    def __post_init__(self) -> None:
        self.pki = make_pki(self.root / "pki")
        # ZooKeeper's PEM key store: the server's private key and certificate in one file.
        key_store = self.root / "pki" / "server-store.pem"
        key_store.write_bytes(self.pki.key.read_bytes() + self.pki.cert.read_bytes())
        key_store.chmod(0o600)
        self.credentials_file = self.root / "pki" / "zookeeper-credentials"
        self.credentials_file.write_text(f"{USER}:{PASSWORD}\n")
        self.credentials_file.chmod(0o600)
        for myid in range(1, self.size + 1):
            directory = self.root / f"zk{myid}"
            (directory / "data").mkdir(parents=True)
            (directory / "data" / "myid").write_text(f"{myid}\n")
            ports = (free_port() for _ in range(4))
            self.servers.append(Server(myid, directory, *ports))
        peers = "".join(
            f"server.{s.myid}=127.0.0.1:{s.quorum_port}:{s.election_port}\n" for s in self.servers
        )
        for server in self.servers:
            (server.directory / "zoo.cfg").write_text(
                f"tickTime={TICK_MS}\ninitLimit=50\nsyncLimit=10\n"
                f"dataDir={server.directory / 'data'}\nclientPort={server.client_port}\n"
                "clientPortAddress=127.0.0.1\n"
                # No Jetty admin server (port 8080 would collide), srvr for the fixture's
                # health check, and no fsync per transaction: a test's data is thrown away.
                "admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok\nforceSync=no\n"
                "maxClientCnxns=0\n"
                f"secureClientPort={server.secure_port}\n"
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
                f"ssl.keyStore.location={key_store}\nssl.keyStore.type=PEM\n"
                f"ssl.trustStore.location={self.pki.ca}\nssl.trustStore.type=PEM\n"
                "authProvider.1=org.apache.zookeeper.server.auth.DigestAuthenticationProvider\n"
                + peers
            )

    @property
    def hosts(self) -> str:
        """The TLS client ports: what the group's nodes are given, with ``access``."""
        return ",".join(server.address for server in self.servers)

    @property
    def plain_hosts(self) -> str:
        """The plaintext client ports: a stranger on the network."""
        return ",".join(server.plain_address for server in self.servers)

    @property
    def access(self) -> ZooKeeperAccess:
        """The group's identity and certificates (the credentials file's content)."""
        return ZooKeeperAccess(USER, PASSWORD, *self.tls_files)

    @property
    def tls_files(self) -> tuple[Path, Path, Path]:
        return self.pki.ca, self.pki.client_cert, self.pki.client_key

    def node_args(self) -> tuple[str, ...]:
        """The ``primacy run`` flags of a node of a group on this ensemble."""
        return (
            "--zookeeper-credentials-file",
            str(self.credentials_file),
            *self.tls_args(),
        )

    def tls_args(self) -> tuple[str, ...]:
        """The TLS flags, which the read-only commands take too."""
        ca, cert, key = self.tls_files
        return (
            "--zookeeper-tls-ca-file",
            str(ca),
            "--zookeeper-tls-cert-file",
            str(cert),
            "--zookeeper-tls-key-file",
            str(key),
        )

    def start(self, server: Server | None = None) -> None:
        """Start every server (or one), not waiting."""
        for one in [server] if server is not None else self.servers:
            if one.process is not None and one.process.poll() is None:
                continue
            log = open(one.directory / "server.log", "ab")  # noqa: SIM115 - the child keeps it
            one.process = subprocess.Popen(
                [
                    "java",
                    "-Xmx128m",
                    *SHORT_LIVED_JVM_OPTIONS,
                    f"-Dzookeeper.log.dir={one.directory}",
                    "-Dzookeeper.root.logger=WARN,CONSOLE",
                    "-cp",
                    ":".join(
                        ["/etc/zookeeper/conf", str(ZOOKEEPER_JAR)]
                        + [f"/usr/share/java/{jar}.jar" for jar in NETTY_JARS]
                    ),
                    "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                    str(one.directory / "zoo.cfg"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            log.close()

    def wait_quorum(self, timeout_s: float = 60.0) -> None:
        """Until every running server serves as leader or follower."""
        running = [s for s in self.servers if s.process is not None and s.process.poll() is None]
        wait_until(lambda: all(s.serving() for s in running), timeout_s, "a ZooKeeper quorum", 0.1)

    def kill(self, server: Server) -> None:
        """SIGKILL one server, and reap it."""
        if server.process is not None and server.process.poll() is None:
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(30)

    def close(self) -> None:
        for server in self.servers:
            self.kill(server)


@contextlib.contextmanager
def running_ensemble(root: Path) -> Iterator[Ensemble]:
    """An ensemble under ``root``, every server serving, killed by pid on the way out."""
    ensemble = Ensemble(root)
    try:
        ensemble.start()
        ensemble.wait_quorum()
        yield ensemble
    finally:
        ensemble.close()
