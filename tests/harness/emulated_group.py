"""A group of supervisors serving STOMP, each node on its own emulated NFS host, and its faults.

Used by the scenarios (``test_scenarios.py``) and the randomized driver
(``bench/chaos.py``). Node ``n<i>`` runs on host ``i``; every host mounts the
same backing directory, which the checker reads directly (as the server).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from primacy.cli.localgroup import NodeProcess, wait_until
from primacy.share.layout import LOCK_FILE_NAME
from tests.harness.emulated_hosts import EmulatedHosts
from tests.harness.nfsemu import EmulatedHost
from tests.harness.traffic import StompGroup

DEMOTED = "PRIMACY-1003"  # the supervisor's log code for a master that lost its lease


class EmulatedGroup:
    """``count`` nodes on ``count`` emulated hosts with lease ``lease_s``; n1 is master first."""

    def __init__(
        self,
        hosts: EmulatedHosts,
        count: int,
        *,
        lease_s: float = 1.0,
        extra: tuple[str, ...] = (),
        stomp_host: str = "127.0.0.1",
    ) -> None:
        self.emulated = hosts
        self.hosts = hosts(count, lease_s=lease_s)
        self.stomp = StompGroup(
            self._start_on_host, count, *extra, start_now=False, stomp_host=stomp_host
        )
        self.url = self.stomp.url
        first = self.stomp.start("n1")
        try:
            wait_until(first.is_master, 30, "n1 to serve as master")
        except AssertionError as error:  # say why, or a failed start tells nothing
            state = "running" if first.alive() else f"exited ({first.process.poll()})"
            log = first.log()[-1500:]
            raise AssertionError(f"{error}; n1 {state}; its log ends:\n{log}") from None
        for index in range(2, count + 1):
            node = self.stomp.start(f"n{index}")
            wait_until(lambda node=node: node.status("/slave") == 200, 30, f"{node.node_id} slave")

    @property
    def backing(self) -> Path:
        """The server's directory: what the checker reads."""
        return self.emulated.backing

    @property
    def nodes(self) -> dict[str, NodeProcess]:
        return self.stomp.nodes

    def host_of(self, node: NodeProcess) -> EmulatedHost:
        return self.hosts[int(node.node_id[1:]) - 1]

    def _start_on_host(self, node_id: str, *args: str) -> NodeProcess:
        return self.emulated.start_node(self.hosts[int(node_id[1:]) - 1], node_id, *args)

    def masters(self) -> list[NodeProcess]:
        return [node for node in self.nodes.values() if node.is_master()]

    def wait_for_master(self, timeout_s: float = 30.0, exclude: Iterable[str] = ()) -> NodeProcess:
        """The one node answering 200 on /master, not in ``exclude``."""
        found: list[NodeProcess] = []
        excluded = set(exclude)

        def one() -> bool:
            found[:] = [n for n in self.masters() if n.node_id not in excluded]
            return len(found) == 1

        wait_until(one, timeout_s, f"one master other than {sorted(excluded)}")
        return found[0]

    def wait_for_slave(self, node: NodeProcess, timeout_s: float = 30.0) -> None:
        wait_until(lambda: node.status("/slave") == 200, timeout_s, f"{node.node_id} slave")

    def wait_until_serving_again(self, timeout_s: float = 60.0) -> NodeProcess:
        """After a fault: every node answers and exactly one is master."""
        for node in self.nodes.values():
            wait_until(
                lambda node=node: node.status("/health") == 200, timeout_s, f"{node.node_id} up"
            )
        return self.wait_for_master(timeout_s)


def epoch_of(node: NodeProcess) -> int | None:
    """The epoch a node reports on /status (None if it has none or does not answer)."""
    connection = http.client.HTTPConnection("127.0.0.1", node.port, timeout=2)
    try:
        connection.request("GET", "/status")
        body = json.loads(connection.getresponse().read())
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        connection.close()
    epoch = body.get("epoch")
    return int(epoch) if epoch is not None else None


def replace_lock_file(host: EmulatedHost) -> None:
    """Replace the share's lock file through ``host``'s mount (an operator's mistake)."""
    replacement = host.share / "lock-replacement"
    replacement.write_text("")
    os.replace(replacement, host.share / LOCK_FILE_NAME)


def freeze_and_replace_lock(group: EmulatedGroup, master: NodeProcess, frozen_s: float) -> None:
    """SIGSTOP the master, replace its lock file from another host, wait, SIGCONT."""
    other = next(n for n in group.nodes.values() if n.node_id != master.node_id)
    master.signal(signal.SIGSTOP)
    try:
        replace_lock_file(group.host_of(other))
        group.wait_for_master(exclude={master.node_id})
        time.sleep(frozen_s)  # the new master serves while the old one is frozen
    finally:
        master.signal(signal.SIGCONT)


def mount_tmpfs(directory: Path, size: str) -> None:
    """Mount a tmpfs of ``size`` (e.g. ``4m``) on ``directory``: a share that can fill up."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
        check=True,
        capture_output=True,
    )


@contextmanager
def share_filled(backing: Path) -> Iterator[None]:
    """Fill the share's filesystem to the last block for the block's duration, then free it."""
    filler = backing / "filler"
    try:
        # Unbuffered: a buffered file would raise ENOSPC again from close().
        with open(filler, "wb", buffering=0) as out:
            try:
                while True:
                    out.write(b"\0" * 65536)
            except OSError:
                pass  # ENOSPC: the share is full now
        yield
    finally:
        filler.unlink(missing_ok=True)
