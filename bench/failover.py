"""Failover time: SIGKILL of the master until another node serves, over many kills.

Prints min / median / max of kill -> new master answering 200 on /master for a
three-node group with default settings, the same for SIGTERM handovers, and a
baseline measured in the same run: two bare processes, no supervisor, where
one holds a flock and the other polls it at the same interval; the ratio shows
what primacy adds to the lock itself (mostly the deliberate takeover wait).
A poller checks /master on every node concurrently throughout, and the run
reports any instant at which two nodes answered 200.

    python bench/failover.py --kills 500

``--coordination-kills N`` instead compares the two coordination backends in
one run: a two-node group with the built-in STOMP broker under a steady
producer and a consumer, first on the share's own lock, then with
``coordination = "zookeeper"`` on a three-server ensemble started on loopback
(session timeout 2 s), N SIGKILLs of the master each, timing kill -> new master
serving (200 on /master) and kill -> the first RECEIPT of a message sent after it.

    python bench/failover.py --coordination-kills 30
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primacy.cli.localgroup import Group, NodeProcess, wait_until
from tests.harness.checker import JournalView
from tests.harness.group import MasterPoller
from tests.harness.traffic import StompGroup, Traffic
from tests.harness.zookeeper import Ensemble, running_ensemble, unavailable_reason
from tests.harness.zookeeper_group import SESSION_TIMEOUT_MS, ZooKeeperGroup

POLL_S = 0.002

BARE_HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    interval = float(sys.argv[2])
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            time.sleep(interval)
    print(time.monotonic(), flush=True)
    time.sleep(3600)
""")


def figures(samples: list[float]) -> str:
    return (
        f"min {min(samples) * 1000:7.1f} ms   median {statistics.median(samples) * 1000:7.1f} ms"
        f"   max {max(samples) * 1000:7.1f} ms   (n={len(samples)})"
    )


def measure_bare_lock(rounds: int, interval_s: float, workdir: Path) -> list[float]:
    """Kill -> acquired for a bare flock poller at the same interval, no supervisor."""
    lock = workdir / "bare.lock"
    samples = []
    holder = subprocess.Popen(
        [sys.executable, "-c", BARE_HOLDER, str(lock), str(interval_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    holder.stdout.readline()
    try:
        for _ in range(rounds):
            waiter = subprocess.Popen(
                [sys.executable, "-c", BARE_HOLDER, str(lock), str(interval_s)],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(random.uniform(0.3, 0.3 + interval_s))  # polling, at a random phase
            killed_at = time.monotonic()
            holder.kill()
            holder.wait()
            assert waiter.stdout is not None
            samples.append(float(waiter.stdout.readline()) - killed_at)
            holder = waiter
    finally:
        holder.kill()
        holder.wait()
    return samples


def time_takeover(group: Group, master: NodeProcess, sig: int) -> float:
    others = [node for node in group.alive() if node is not master]
    killed_at = time.monotonic()
    master.signal(sig)
    wait_until(
        lambda: any(node.is_master() for node in others), 30, "a new master", interval_s=POLL_S
    )
    took = time.monotonic() - killed_at
    master.process.wait(15)
    return took


def run(kills: int, handovers: int, bare_rounds: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="primacy-bench-failover-"))
    share = workdir / "share"
    share.mkdir()
    group = Group(share=share, log_dir=workdir)
    kill_samples: list[float] = []
    term_samples: list[float] = []
    try:
        print(f"baseline: bare flock poller, 100 ms interval, {bare_rounds} kills ...", flush=True)
        bare = measure_bare_lock(bare_rounds, 0.1, workdir)
        nodes = group.start_many(3)
        with MasterPoller(nodes) as poller:
            for index in range(kills + handovers):
                wait_until(
                    lambda: sum(n.status("/health") == 200 for n in group.alive()) >= 2,
                    30,
                    "two running nodes",
                )
                master = group.wait_for_master(timeout_s=30)
                sig = signal.SIGKILL if index < kills else signal.SIGTERM
                (kill_samples if sig == signal.SIGKILL else term_samples).append(
                    time_takeover(group, master, sig)
                )
                poller.add(group.start(master.node_id))
                if (index + 1) % 50 == 0:
                    print(f"  {index + 1} takeovers done", flush=True)
        conflicts = poller.two_masters()
        claims = sum(1 for answer in poller.answers if answer.status == 200)
    finally:
        group.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    print("three nodes, default settings")
    print("(acquire interval 100 ms, keepalive 250 ms, takeover wait 275 ms)")
    print(f"SIGKILL -> new master serving : {figures(kill_samples)}")
    if term_samples:
        print(f"SIGTERM -> new master serving : {figures(term_samples)}")
    print(f"baseline bare flock handoff   : {figures(bare)}")
    ratio = statistics.median(kill_samples) / statistics.median(bare)
    print(f"ratio median primacy/baseline : {ratio:.2f}")
    print(
        f"/master answers polled: {len(poller.answers)}, of which 200: {claims}; "
        f"instants with two masters: {len(conflicts)}"
    )


def kill_and_time(group: Group, stomp: StompGroup, traffic: Traffic) -> tuple[float, float]:
    """SIGKILL the master: seconds until another node serves, and until the producer's first
    RECEIPT of a message sent after the kill (as the producer noticed it: within its 5 ms
    sending interval).
    The killed node is started again, as a slave, before returning."""
    master = group.wait_for_master(timeout_s=60)
    acknowledged = len(traffic.acknowledged)
    wait_until(lambda: len(traffic.acknowledged) > acknowledged + 5, 30, "traffic flowing")
    others = [node for node in group.alive() if node is not master]
    killed_wall_ns, killed_at = time.time_ns(), time.monotonic()
    master.signal(signal.SIGKILL)
    # Every id not sent yet now is sent after the kill: only the new master can receipt it.
    sent_before = set(traffic.sent)
    wait_until(lambda: any(n.is_master() for n in others), 60, "a new master", POLL_S)
    serving_s = time.monotonic() - killed_at

    def first_receipt_ns() -> int | None:
        after = [t for i, t in list(traffic.receipt_times_ns.items()) if i not in sent_before]
        return min(after) if after else None

    wait_until(lambda: first_receipt_ns() is not None, 60, "a RECEIPT after the kill")
    receipt_s = ((first_receipt_ns() or killed_wall_ns) - killed_wall_ns) / 1e9
    master.process.wait(15)
    restarted = stomp.start(master.node_id)
    wait_until(lambda: restarted.status("/slave") == 200, 60, "the killed node a slave again")
    return serving_s, receipt_s


def compare_coordination(kills: int) -> None:
    """The share's lock and ZooKeeper, one after the other in this run, on the same traffic."""
    reason = unavailable_reason()
    if reason:
        print(f"cannot run: {reason}")
        return
    workdir = Path(tempfile.mkdtemp(prefix="primacy-bench-coordination-"))
    results: dict[str, tuple[list[float], list[float]]] = {}
    try:
        with running_ensemble(workdir / "zookeeper") as ensemble:
            _kill_on_each_backend(kills, workdir, ensemble, results)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    print("two nodes, default settings, one producer sending every 5 ms, SIGKILL of the master")
    print(f"ZooKeeper: three servers on loopback, session timeout {SESSION_TIMEOUT_MS} ms")
    for backend, (serving, receipt) in results.items():
        print(f"{backend:9} kill -> new master serving : {figures(serving)}")
        print(f"{backend:9} kill -> first RECEIPT      : {figures(receipt)}")


def _kill_on_each_backend(
    kills: int,
    workdir: Path,
    ensemble: Ensemble,
    results: dict[str, tuple[list[float], list[float]]],
) -> None:
    """N kills on the share's lock, then N on ZooKeeper; the timings into ``results``."""
    for backend in ("share", "zookeeper"):
        share = workdir / backend / "share"
        share.mkdir(parents=True)
        group = Group(share=share, log_dir=share.parent)
        zookeeper: ZooKeeperGroup | None = None
        try:
            if backend == "zookeeper":
                zookeeper = ZooKeeperGroup(group, ensemble)
                stomp = zookeeper.stomp
            else:
                stomp = StompGroup(group.start, 2)
            serving, receipt = results.setdefault(backend, ([], []))
            with Traffic(stomp.url, 1, 10**9, interval_s=0.005) as traffic:
                for index in range(kills):
                    took = kill_and_time(group, stomp, traffic)
                    serving.append(took[0])
                    receipt.append(took[1])
                    if (index + 1) % 10 == 0:
                        print(f"  {backend}: {index + 1} kills done", flush=True)
            # The one consumer, a receipt per acknowledgement, may trail a producer sending
            # every 5 ms on a loaded machine: what counts is that the journal holds every
            # acknowledged message (bench/chaos.py's checker judges the rest).
            missing = traffic.acknowledged - set(JournalView.read(share).sends())
            print(
                f"  {backend}: acknowledged {len(traffic.acknowledged)}, not in the journal "
                f"{len(missing)}, consumed {len(traffic.consumed)} by the end of the drain"
            )
        finally:
            group.close()
            if zookeeper is not None:
                zookeeper.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kills", type=int, default=500, help="SIGKILL takeovers to time (default 500)"
    )
    parser.add_argument(
        "--handovers", type=int, default=50, help="SIGTERM handovers to time (default 50)"
    )
    parser.add_argument(
        "--baseline-rounds", type=int, default=50, help="bare flock handoffs (default 50)"
    )
    parser.add_argument(
        "--coordination-kills",
        type=int,
        default=0,
        metavar="N",
        help="instead: N kills on the share's lock and N on ZooKeeper, in this run",
    )
    args = parser.parse_args()
    if args.coordination_kills:
        compare_coordination(args.coordination_kills)
        return
    run(args.kills, args.handovers, args.baseline_rounds)


if __name__ == "__main__":
    main()
