"""Failover time: SIGKILL of the master until another node serves, over many kills.

Prints min / median / max of kill -> new master answering 200 on /master for a
three-node group with default settings, the same for SIGTERM handovers, and a
baseline measured in the same run: two bare processes, no supervisor, where
one holds a flock and the other polls it at the same interval; the ratio shows
what primacy adds to the lock itself (mostly the deliberate takeover wait).
A poller checks /master on every node concurrently throughout, and the run
reports any instant at which two nodes answered 200.

    python bench/failover.py --kills 500
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
from tests.harness.group import MasterPoller

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
    args = parser.parse_args()
    run(args.kills, args.handovers, args.baseline_rounds)


if __name__ == "__main__":
    main()
