"""The two highly available groups under test, behind one small interface.

``PrimacyGroup`` runs primacy supervisors serving STOMP on a shared
directory; ``ActiveMQPair`` runs two ActiveMQ Classic JVMs in the foreground
on one shared KahaDB directory. Both track every process they start by pid
and kill them all in ``close()``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Protocol

import psutil

from bench.activemq.config import AmqTls, LockerTiming, java_command, write_instance
from primacy.cli.localgroup import Group, NodeProcess, free_port, wait_until

Address = tuple[str, int]

# ActiveMQ's log lines (5.17) that tell its role.
_STARTED = re.compile(r"Apache ActiveMQ \S+ \([^)]*\) started")
_SLAVE = "This broker is now in slave mode"


class HaGroup(Protocol):
    """What the benchmark needs from a master/slave group."""

    label: str

    def stomp_addresses(self) -> list[Address]: ...

    def master_address(self) -> Address: ...

    def master_pid(self) -> int: ...

    def slave_pids(self) -> list[int]: ...

    def kill_master(self) -> float:
        """SIGKILL the master; returns time.monotonic() just before the signal."""
        ...

    def restore(self) -> None:
        """Restart what ``kill_master`` killed and wait until it is a slave again."""
        ...

    def close(self) -> None: ...


def _process_tree(pid: int) -> list[psutil.Process]:
    """A process and all its descendants."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants, in bytes."""
    total = 0
    for process in _process_tree(pid):
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return int(total)


class CpuMeter:
    """User and system CPU a process and its descendants spend between ``start`` and ``stop``
    (the master's node, or its JVM: a broker's own CPU, not its clients')."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seconds = 0.0
        self.messages = 0
        self._started = 0.0

    def _tree_seconds(self) -> float:
        total = 0.0
        for process in _process_tree(self.pid):
            try:
                times = process.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    def start(self) -> None:
        self._started = self._tree_seconds()

    def stop(self, messages: int) -> None:
        """End the window in which ``messages`` were receipted."""
        self.seconds = self._tree_seconds() - self._started
        self.messages = messages

    @property
    def per_message(self) -> float:
        """CPU seconds per message over the window."""
        return self.seconds / self.messages if self.messages else float("nan")


class PrimacyGroup:
    """``nodes`` primacy supervisors with default settings, each serving STOMP while master.

    ``bench/activemq/under_primacy.py`` builds on it: a subclass says how a node starts,
    when the group is complete and where clients connect; killing the master and restoring
    it are the same for both.
    """

    label = "primacy"

    def __init__(
        self,
        root: Path,
        nodes: int | tuple[str, ...] = 3,
        extra_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        """``nodes``: how many (named n1, n2, ...) or their names; ``extra_args`` for every
        node's ``primacy run`` (the TLS certificate, say); ``env`` added to every node's
        environment (bench/soak.py's memory probe)."""
        self.env = env
        share = root / "share"
        share.mkdir(parents=True)
        self.group = Group(share=share, log_dir=root, common_args=extra_args)
        node_ids = nodes if isinstance(nodes, tuple) else [f"n{i}" for i in range(1, nodes + 1)]
        self.stomp_ports = {node_id: free_port() for node_id in node_ids}
        self._killed: str | None = None

    def start(self) -> None:
        for node_id in self.stomp_ports:
            self.start_node(node_id)
        self._wait_complete()

    def start_node(self, node_id: str) -> NodeProcess:
        return self.group.start(
            node_id, "--stomp", f"127.0.0.1:{self.stomp_ports[node_id]}", env=self.env
        )

    def _wait_complete(self) -> None:
        wait_until(
            lambda: (
                sum(node.status("/health") == 200 for node in self.group.alive())
                == len(self.stomp_ports)
            ),
            60,
            "every primacy node answers /health",
        )
        self.group.wait_for_master(timeout_s=60)

    def wait_for_a_master(self) -> NodeProcess:
        return self.group.wait_for_master(timeout_s=60)

    def stomp_addresses(self) -> list[Address]:
        return [("127.0.0.1", port) for port in self.stomp_ports.values()]

    def master_address(self) -> Address:
        return ("127.0.0.1", self.stomp_ports[self.wait_for_a_master().node_id])

    def master_pid(self) -> int:
        return self.wait_for_a_master().pid

    def slave_pids(self) -> list[int]:
        master = self.wait_for_a_master()
        return [node.pid for node in self.group.alive() if node is not master]

    def kill_master(self) -> float:
        master = self.wait_for_a_master()
        self._killed = master.node_id
        killed_at = time.monotonic()
        master.signal(signal.SIGKILL)
        master.process.wait(15)
        return killed_at

    def restore(self) -> None:
        if self._killed is not None:
            self.start_node(self._killed)
            self._killed = None
        self._wait_complete()

    def close(self) -> None:
        self.group.close()  # SIGKILL by pid to every process it ever started


class ActiveMQBroker:
    """One ActiveMQ Classic JVM in the foreground, with its own base directory and log."""

    def __init__(
        self,
        name: str,
        base: Path,
        *,
        stomp_port: int,
        kahadb_dir: Path,
        timing: LockerTiming,
        heap_mb: int,
        tls: AmqTls | None = None,
        openwire_port: int | None = None,
    ) -> None:
        self.name = name
        self.openwire_port = openwire_port
        self.stomp_port = stomp_port
        self.tls_port = tls.port if tls is not None else None
        self.conf_file = write_instance(
            base,
            broker_name=name,
            stomp_port=stomp_port,
            kahadb_dir=kahadb_dir,
            timing=timing,
            tls=tls,
            openwire_port=openwire_port,
        )
        self.command = java_command(base=base, conf_file=self.conf_file, heap_mb=heap_mb)
        self.log_path = base / "broker.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.every_process: list[subprocess.Popen[bytes]] = []
        self._log_offset = 0

    def start(self) -> None:
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log_file:
            # Own session: a Ctrl-C reaches the harness only, which then kills the JVM by pid.
            self.process = subprocess.Popen(
                self.command,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.every_process.append(self.process)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_since_start(self) -> str:
        with open(self.log_path, "rb") as log_file:
            log_file.seek(self._log_offset)
            return log_file.read().decode(errors="replace")

    def role(self) -> str:
        """``master``, ``slave``, ``starting`` or ``dead``, from this run's log lines."""
        if not self.alive():
            return "dead"
        log = self.log_since_start()
        if _STARTED.search(log):
            return "master"
        return "slave" if _SLAVE in log else "starting"

    def kill(self) -> float:
        assert self.process is not None
        killed_at = time.monotonic()
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(15)
        return killed_at

    def close(self) -> None:
        for process in self.every_process:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
        for process in self.every_process:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                pass


class ActiveMQPair:
    """Two ActiveMQ Classic brokers on one shared KahaDB directory (shared file master/slave)."""

    def __init__(
        self,
        root: Path,
        timing: LockerTiming,
        heap_mb: int = 256,
        key_store: tuple[Path, str] | None = None,
        openwire: bool = False,
    ) -> None:
        """``key_store`` (PKCS12 file, password): each broker also gets a stomp+ssl connector.
        ``openwire``: and an OpenWire one, for ActiveMQ's JMS client (``openwire_ports``)."""
        self.label = f"ActiveMQ {timing.label}"
        self.timing = timing
        kahadb = root / "share" / "kahadb"
        kahadb.mkdir(parents=True)
        self.brokers = [
            ActiveMQBroker(
                f"amq{index}",
                root / f"amq{index}",
                stomp_port=free_port(),
                kahadb_dir=kahadb,
                timing=timing,
                heap_mb=heap_mb,
                tls=AmqTls(free_port(), *key_store) if key_store is not None else None,
                openwire_port=free_port() if openwire else None,
            )
            for index in (1, 2)
        ]
        self.openwire_ports = [b.openwire_port for b in self.brokers if b.openwire_port]
        self._killed: ActiveMQBroker | None = None

    def start(self) -> None:
        first, second = self.brokers
        first.start()
        self._wait_role(first, "master")
        second.start()
        self._wait_role(second, "slave")

    def _wait_role(self, broker: ActiveMQBroker, role: str, timeout_s: float = 90) -> None:
        def reached() -> bool:
            current = broker.role()
            if current == "dead":
                tail = broker.log_since_start()[-2000:]
                raise RuntimeError(f"ActiveMQ {broker.name} exited; its log ends:\n{tail}")
            return current == role

        wait_until(reached, timeout_s, f"ActiveMQ {broker.name} to be {role}", interval_s=0.05)

    def _master(self) -> ActiveMQBroker:
        masters = [broker for broker in self.brokers if broker.role() == "master"]
        if len(masters) != 1:
            roles = ", ".join(f"{b.name}: {b.role()}" for b in self.brokers)
            raise RuntimeError(f"expected one ActiveMQ master, found {roles}")
        return masters[0]

    def stomp_addresses(self) -> list[Address]:
        return [("127.0.0.1", broker.stomp_port) for broker in self.brokers]

    def master_address(self) -> Address:
        return ("127.0.0.1", self._master().stomp_port)

    def master_tls_address(self) -> Address:
        port = self._master().tls_port
        assert port is not None, "started without a key store"
        return ("127.0.0.1", port)

    def master_pid(self) -> int:
        return self._master().pid

    def slave_pids(self) -> list[int]:
        master = self._master()
        return [broker.pid for broker in self.brokers if broker is not master and broker.alive()]

    def kill_master(self) -> float:
        master = self._master()
        self._killed = master
        return master.kill()

    def restore(self) -> None:
        killed, self._killed = self._killed, None
        if killed is not None:
            other = next(broker for broker in self.brokers if broker is not killed)
            self._wait_role(other, "master")
            killed.start()
            self._wait_role(killed, "slave")

    def close(self) -> None:
        for broker in self.brokers:
            broker.close()
