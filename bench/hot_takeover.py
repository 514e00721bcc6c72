"""kill -9 of the master after a busy run: the first RECEIPT with and without a hot standby.

Three two-node groups in one run, each under the same steady traffic (one producer
sending every 5 ms, one consumer; primacy's own failover client), each killed
``--kills`` times:

- fresh: a fresh share, no burst before the kill (the floor);
- busy, cold: before each kill a burst of ``--burst`` messages, consumed and acknowledged
  (the journal holds them since its last checkpoint; with ``--leave-pending`` nobody reads
  them and they stay pending, as a backlog leaves them), slaves do not follow the journal
  (``--journal-follow-interval-ms 0``: a takeover reads it from the newest checkpoint);
- busy, hot: the same bursts, slaves follow the journal (the default).

Prints min / median / max of kill -> new master serving and kill -> first RECEIPT of a
message sent after the kill, the ratios of the medians, and how each new master opened
its journal (``/status`` ``journal.opened_from``, ``bytes_read_at_open``).

    .venv/bin/python bench/hot_takeover.py --kills 5 --burst 20000

``--cost`` instead measures what following costs: a two-node group under ``--burst``
messages sent and acknowledged at full rate (no kill), the CPU seconds (user + system, from
/proc) each process spent during the burst and their peak and current resident memory
(VmHWM, VmRSS), the slave's beside the master's.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.failover import figures, kill_and_time
from primacy.cli.localgroup import Group, NodeProcess
from primacy.client.consumer import Consumer
from primacy.client.producer import Producer
from tests.harness.traffic import StompGroup, Traffic

BURST_QUEUE = "/queue/busy-day"
SCENARIOS = {
    "fresh": (0, ()),
    "busy, cold": (1, ("--journal-follow-interval-ms", "0")),
    "busy, hot": (1, ()),
}


def burst(url: str, count: int, leave_pending: bool = False) -> None:
    producer = Producer(url, window=256)
    try:
        for number in range(count):
            producer.send(BURST_QUEUE, b"x" * 100 + str(number).encode())
        producer.flush()
    finally:
        producer.close()
    if leave_pending:
        return
    consumer = Consumer(url, BURST_QUEUE, prefetch=1000)
    try:
        for _ in range(count):
            message = consumer.receive(30)
            assert message is not None, "the burst was not delivered"
            consumer.ack(message, wait=False)
        consumer.flush()
    finally:
        consumer.close()


def opening(node: NodeProcess) -> str:
    journal = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=5).json()["journal"]
    return f"{journal['opened_from']} ({journal['bytes_read_at_open']} bytes read)"


def run_scenario(
    name: str, kills: int, burst_size: int, leave_pending: bool, workdir: Path
) -> tuple[list[float], list[float], list[str]]:
    with_burst, extra = SCENARIOS[name]
    share = workdir / name.replace(", ", "-") / "share"
    share.mkdir(parents=True)
    group = Group(share=share, log_dir=share.parent)
    serving: list[float] = []
    receipt: list[float] = []
    openings: list[str] = []
    try:
        stomp = StompGroup(group.start, 2, *extra)
        with Traffic(stomp.url, 1, 10**9, interval_s=0.005) as traffic:
            for _ in range(kills):
                if with_burst:
                    burst(stomp.url, burst_size, leave_pending)
                took = kill_and_time(group, stomp, traffic)
                serving.append(took[0])
                receipt.append(took[1])
                openings.append(opening(group.wait_for_master(timeout_s=60)))
                print(f"  {name}: kill {len(serving)}: {took[1] * 1000:.0f} ms", flush=True)
    finally:
        group.close()
    return serving, receipt, openings


# Where a takeover's time goes, from the nodes' own log lines: ms after the lock was acquired
# (PRIMACY-1001) to the first of each code after it, in takeover order.
STEPS = (
    ("claimed", ("PRIMACY-1002",)),
    ("journal opened", ("PRIMACY-1415", "PRIMACY-1416")),
    ("fence", ("PRIMACY-1409",)),
    ("takeover checkpoint", ("PRIMACY-1410",)),
    ("serving", ("PRIMACY-1005",)),
    ("listening", ("PRIMACY-1516",)),
)


def takeover_steps(log_dir: Path) -> list[dict[str, float]]:
    """Every acquisition of the lock the node logs under ``log_dir`` kept (PRIMACY-1001 into
    ``acquired``; the code is logged at every role change), each step's ms after it: the
    first line of its code after the acquisition (a takeover checkpoint only after the fence:
    a fresh share has none)."""
    found = []
    for log in sorted(log_dir.rglob("*.log")):
        steps: dict[str, float] | None = None
        acquired = 0.0
        for line in log.read_text(errors="replace").splitlines():
            try:
                at = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            if "PRIMACY-1001" in line and "-> acquired" in line:
                steps, acquired = {}, at
                found.append(steps)
                continue
            if steps is None:
                continue
            for name, codes in STEPS:
                if name in steps or not any(code in line for code in codes):
                    continue
                if name == "takeover checkpoint" and "fence" not in steps:
                    continue
                steps[name] = (at - acquired) * 1000
    return found


def print_steps(name: str, log_dir: Path) -> None:
    found = takeover_steps(log_dir)
    cells = []
    for step, _ in STEPS:
        values = sorted(steps[step] for steps in found if step in steps)
        middle = statistics.median(values) if values else 0
        cells.append(f"{values[0]:.0f} / {middle:.0f} / {values[-1]:.0f}" if values else "-")
    print(f"| {name} ({len(found)} logged) | " + " | ".join(cells) + " |")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory_kib(pid: int) -> dict[str, int]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            found[key] = int(value.split()[0])
    return found


def measure_cost(burst_size: int, workdir: Path) -> None:
    share = workdir / "cost" / "share"
    share.mkdir(parents=True)
    group = Group(share=share, log_dir=share.parent)
    try:
        stomp = StompGroup(group.start, 2)
        master = group.wait_for_master(timeout_s=60)
        slave = next(node for node in stomp.nodes.values() if node is not master)
        burst(stomp.url, 1000)  # warm both up
        before = {node.node_id: _cpu_s(node.pid) for node in (master, slave)}
        started = time.monotonic()
        burst(stomp.url, burst_size)
        took = time.monotonic() - started
        cpu = {node.node_id: _cpu_s(node.pid) - before[node.node_id] for node in (master, slave)}
        follower = httpx.get(f"http://127.0.0.1:{slave.port}/status", timeout=5).json()
        if not master.is_master():
            print("the master changed during the burst (a loaded machine?): figures void")
        print(f"{burst_size} messages sent and acknowledged in {took:.1f} s")
        for role, node in (("master", master), ("slave", slave)):
            memory = _memory_kib(node.pid)
            print(
                f"{role:6} CPU {cpu[node.node_id]:6.2f} s   peak RSS {memory['VmHWM'] / 1024:6.1f} "
                f"MiB   RSS {memory['VmRSS'] / 1024:6.1f} MiB"
            )
        print(
            f"slave / master: CPU {cpu[slave.node_id] / cpu[master.node_id]:.2f}, peak RSS "
            f"{_memory_kib(slave.pid)['VmHWM'] / _memory_kib(master.pid)['VmHWM']:.2f}; the "
            f"slave's follower: {follower['follower']}"
        )
    finally:
        group.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--burst", type=int, default=20_000)
    parser.add_argument("--leave-pending", action="store_true", help="nobody reads the bursts")
    parser.add_argument("--cost", action="store_true", help="what following costs, no kills")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="primacy-bench-hot-"))
    if args.cost:
        try:
            measure_cost(args.burst, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return
    results = {}
    try:
        for name in SCENARIOS:
            results[name] = run_scenario(name, args.kills, args.burst, args.leave_pending, workdir)
        print()
        print("ms after the lock was acquired (min / median / max), every acquisition logged:")
        print("| scenario (takeovers) | " + " | ".join(step for step, _ in STEPS) + " |")
        for name in SCENARIOS:
            print_steps(name, workdir / name.replace(", ", "-"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(
        f"two nodes, default settings, one producer every 5 ms; busy: {args.burst} messages "
        f"{'left pending' if args.leave_pending else 'sent and acknowledged'} before each of "
        f"{args.kills} SIGKILLs"
    )
    medians = {}
    for name, (serving, receipt, openings) in results.items():
        medians[name] = statistics.median(receipt)
        print(f"{name:11} kill -> new master serving : {figures(serving)}")
        print(f"{name:11} kill -> first RECEIPT      : {figures(receipt)}")
        print(f"{name:11} journal opened             : {'; '.join(openings)}")
    print(f"first RECEIPT, busy hot / fresh      : {medians['busy, hot'] / medians['fresh']:.2f}")
    print(
        f"first RECEIPT, busy hot / busy cold  : {medians['busy, hot'] / medians['busy, cold']:.2f}"
    )
    print(f"first RECEIPT, busy cold / fresh     : {medians['busy, cold'] / medians['fresh']:.2f}")


if __name__ == "__main__":
    main()
