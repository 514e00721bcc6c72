"""`primacy demo`: a local group on a temporary share, a crash failover, a graceful handover."""

from __future__ import annotations

import collections
import json
import shutil
import signal
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

from primacy.cli.demo_traffic import DemoTraffic
from primacy.cli.localgroup import Group, NodeProcess, free_port, wait_until
from primacy.store import tools

_POLL_S = 0.005


def run_demo(nodes: int = 3) -> int:
    if nodes < 2:
        print("primacy demo: a failover needs at least 2 nodes (--nodes 2 or more)")
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="primacy-demo-"))
    share = workdir / "share"
    share.mkdir()
    group = Group(share=share, log_dir=workdir)
    try:
        result = _tour(group, nodes)
    except AssertionError as exc:  # a wait timed out: say what, and keep the logs
        group.close()
        print(f"\ndemo failed: {exc}; the nodes' logs are kept in {workdir}")
        return 1
    except BaseException:
        group.close()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    group.close()
    shutil.rmtree(workdir, ignore_errors=True)
    print("\nstopped every node the demo started and removed its temporary share.")
    return result


def _tour(group: Group, count: int) -> int:
    print(f"starting {count} nodes on a temporary share {group.share} ...")
    stomp_ports = {f"n{i}": free_port() for i in range(1, count + 1)}
    for node_id, port in stomp_ports.items():
        group.start(node_id, "--stomp", f"127.0.0.1:{port}")
    for node in group.nodes.values():
        wait_until(lambda node=node: node.status("/health") == 200, 30, f"{node.node_id} to start")
    master = group.wait_for_master(timeout_s=30)
    _show(group, "the group elected one master")

    addresses = ",".join(f"tcp://127.0.0.1:{port}" for port in stomp_ports.values())
    url = f"failover:({addresses})?initialReconnectDelay=10&maxReconnectDelay=200"
    print(f"\na producer and a consumer run against {url}")
    traffic = DemoTraffic(url)
    traffic.start()
    time.sleep(1.0)

    print(f"\n1. crash: kill -9 the master {master.node_id} (pid {master.pid})")
    took_s, new = _time_takeover(group, master, signal.SIGKILL)
    print(
        f"   {new.node_id} is serving as master {took_s:.3f} s after the kill "
        f"(epoch {_status(new).get('epoch')})"
    )
    crash_wait_skipped = _NO_TAKEOVER_WAIT in new.log()
    time.sleep(1.0)

    print(f"\n2. graceful: SIGTERM the master {new.node_id}; it releases the lock at once")
    took_s, newest = _time_takeover(group, new, signal.SIGTERM)
    print(
        f"   {newest.node_id} is serving as master {took_s:.3f} s after the SIGTERM "
        f"(epoch {_status(newest).get('epoch')})"
    )
    time.sleep(1.0)
    counts = traffic.stop()
    _show(group, "after both failovers")
    stored_twice = _stored_twice(group.share)
    print(
        f"\nmessages: sent {counts.sent}, acknowledged {counts.acknowledged}, "
        f"consumed {counts.consumed}, lost {counts.lost}, delivered twice {counts.duplicates} "
        f"(at-least-once delivery), stored twice {stored_twice}; "
        f"the producer failed over {counts.failovers_seen} times"
    )
    print(_why(crash_wait_skipped))
    return 0 if counts.lost == 0 and stored_twice == 0 else 1


# What a new master logs when the previous master's process has ended on its own kernel
# (supervisor/shell/share_jobs.py): it has no claim left to outlast.
_NO_TAKEOVER_WAIT = "the previous master's process has ended: no takeover wait"


def _why(crash_wait_skipped: bool) -> str:
    """Why the two failovers took what they took (docs/safety.md)."""
    if crash_wait_skipped:
        crash = (
            "Why so quick after a crash: the kernel closed the dead master's lock file, which "
            "woke a slave (otherwise it tries the lock every 100 ms). The epoch record it found "
            "names a process of this kernel that has ended, and a process that has ended claims "
            "nothing, so there was no claim to wait out."
        )
    else:
        crash = (
            "Why the crash took longer: the new master could not prove that the old master's "
            "process had ended (docs/safety.md says what counts as proof), so it waited out the "
            "old claim."
        )
    crash += (
        " Across hosts a node cannot see the old master's process, so a new master always waits "
        "one keepalive period and a tenth (275 ms with the defaults) after claiming its epoch, "
        "until an old master that lost its lock without knowing has stopped claiming the role."
    )
    graceful = (
        "A graceful stop needs no wait anywhere: the old master stops claiming, marks its epoch "
        "released and lets the lock go (docs/safety.md)."
    )
    return "\n" + textwrap.fill(crash, width=96) + "\n" + textwrap.fill(graceful, width=96)


def _stored_twice(share: Path) -> int:
    """Message ids the journal holds more than once (it never should)."""
    records: list[dict[str, object]] = []
    tools.dump(share, records.append)
    sends = collections.Counter(r["message_id"] for r in records if r["type"] == "SEND")
    return sum(1 for count in sends.values() if count > 1)


def _time_takeover(group: Group, master: NodeProcess, sig: int) -> tuple[float, NodeProcess]:
    others = [node for node in group.alive() if node is not master]
    started = time.monotonic()
    master.signal(sig)
    found: list[NodeProcess] = []

    def someone_serves() -> bool:
        found[:] = [node for node in others if node.is_master()]
        return bool(found)

    wait_until(someone_serves, 30, "another node to serve as master", interval_s=_POLL_S)
    took_s = time.monotonic() - started
    master.process.wait(15)
    return took_s, found[0]


def _status(node: NodeProcess) -> dict[str, object]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/status", timeout=2) as response:
            data: dict[str, object] = json.loads(response.read())
            return data
    except OSError:
        return {}


def _show(group: Group, title: str) -> None:
    print(f"\n   {title}:")
    print(f"   {'node':<6} {'pid':>7}  {'role':<9} {'epoch':>5}  status endpoint")
    for node in group.nodes.values():
        if not node.alive():
            print(f"   {node.node_id:<6} {node.pid:>7}  {'(gone)':<9} {'':>5}")
            continue
        status = _status(node)
        print(
            f"   {node.node_id:<6} {node.pid:>7}  {status.get('role', '?')!s:<9} "
            f"{status.get('epoch') or '-'!s:>5}  http://127.0.0.1:{node.port}/status"
        )
