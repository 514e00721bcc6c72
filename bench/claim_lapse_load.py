"""Claim-lapse kills on a busy host: how often a warm group's guardian kills a healthy child.

Starts a two-node warm group (``exec_warm_standby``, a child that only sleeps), waits
for a master, then loads the host with CPU hogs (default two per core: load about 2x
cores) and a 10 Hz ``/master`` poller on each node (as a load balancer's checks) for
``--minutes``. Counts, from the node logs, the guardian's kills of a child whose claim
lapsed unconfirmed (``PRIMACY-1106 ... the claim lapsed unconfirmed: killing the tree``)
and the node's own "confirmed late" lines (``PRIMACY-1113``), and prints them per hour
beside the lease checks' lateness. Run it once per setting on the same host, one after
the other, and compare: absolute figures depend on what else the host runs.

    .venv/bin/python bench/claim_lapse_load.py --minutes 3
    .venv/bin/python bench/claim_lapse_load.py --minutes 3 --keepalive-ms 1000
    sudo .venv/bin/python bench/claim_lapse_load.py --minutes 3 --node-nice -5
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primacy.cli.localgroup import Group
from primacy.supervisor import codes

# A hog spins while its parent (this script) lives: a run stopped by a signal that skips the
# ``finally`` below (SIGTERM, SIGKILL) once left four hogs loading the host for an hour.
HOG = (
    "import os\nparent = os.getppid()\n"
    "while os.getppid() == parent:\n    for _ in range(200_000): pass"
)
LATE = re.compile(re.escape(codes.CLAIM_CONFIRMED_LATE) + r" .*?confirmed .*? (\d+) ms after")
# Not "the supervisor is gone: killing the tree", which every guardian says when the run ends.
# Each kill says how late after the claim's end the guardian acted (its part of the margin
# GUARDIAN_KILL_LEAD leaves before another node's takeover wait ends).
KILLED = re.compile(
    re.escape(codes.CHILD_CLAIM_LAPSED)
    + r" .*the claim lapsed unconfirmed: killing the tree(?: \(.*?acted (-?\d+) ms after\))?"
)


def poll(group: Group, stop: threading.Event) -> None:
    while not stop.is_set():
        for node in group.alive():
            node.status("/master", timeout_s=1.0)
        stop.wait(0.1)


def run(minutes: float, hogs: int, keepalive_ms: int | None, node_nice: int) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="claim-lapse-"))
    share, logs = work / "share", work / "logs"
    share.mkdir()
    logs.mkdir()
    config = work / "node.toml"
    lines = ["exec_warm_standby = true"]
    if keepalive_ms is not None:
        lines.append(f"lock_keep_alive_period_ms = {keepalive_ms}")
    config.write_text("\n".join(lines) + "\n")
    group = Group(share, logs, ("--config", str(config)))
    hog_processes: list[subprocess.Popen[bytes]] = []
    stop = threading.Event()
    poller = threading.Thread(target=poll, args=(group, stop), daemon=True)
    try:
        for node_id in ("a", "b"):  # niced as primacy-exec@.service's Nice= does
            group.start(
                node_id, exec_command=["sleep", "100000"], preexec_fn=lambda: os.nice(node_nice)
            )
        group.wait_for_master(30)
        hog_processes = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
        poller.start()
        started = time.monotonic()
        time.sleep(minutes * 60)
        elapsed_h = (time.monotonic() - started) / 3600
    finally:
        stop.set()
        for hog in hog_processes:
            hog.send_signal(signal.SIGKILL)
            hog.wait()
        group.close()
    text = "".join(node.log() for node in group.every_process)
    late_ms = sorted(int(m) for m in LATE.findall(text))
    kills_late_ms = [int(m) for m in KILLED.findall(text) if m]
    kills = len(KILLED.findall(text))
    shutil.rmtree(work, ignore_errors=True)
    return {
        "hours": elapsed_h,
        "kills": kills,
        "late": len(late_ms),
        "late_max_ms": late_ms[-1] if late_ms else 0,
        "kill_late_max_ms": max(kills_late_ms, default=0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--hogs", type=int, default=2 * (os.cpu_count() or 1))
    parser.add_argument("--keepalive-ms", type=int, default=None, help="default: the node's")
    parser.add_argument(
        "--node-nice",
        type=int,
        default=0,
        help="the nodes' niceness (the unit's Nice=); -5 needs root",
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    result = run(args.minutes, args.hogs, args.keepalive_ms, args.node_nice)
    per_hour = 1 / result["hours"]
    print(
        f"keepalive {args.keepalive_ms or 'default'} ms, node niceness {args.node_nice}, "
        f"{args.hogs} hogs on "
        f"{os.cpu_count()} cores (load before {load:.1f}, after {os.getloadavg()[0]:.1f}), "
        f"{args.minutes} min"
    )
    print(
        f"  claim-lapse kills: {result['kills']} ({result['kills'] * per_hour:.0f}/h, "
        f"the guardian acting up to {result['kill_late_max_ms']} ms after the claim's end); "
        f"late confirmations (PRIMACY-1113): {result['late']} "
        f"({result['late'] * per_hour:.0f}/h, latest by {result['late_max_ms']} ms)"
    )


if __name__ == "__main__":
    main()
