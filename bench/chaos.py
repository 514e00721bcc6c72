"""Chaos: random shared-storage faults on groups on emulated NFS mounts, judged by the checker.

Each trial starts a fresh 2- or 3-node group, each node on its own emulated
NFSv4 host (tests/fault/nfsemu), runs two producers and a consumer with
failover URLs, injects one to three random faults (partitions past and short
of the lease, SIGSTOP plus a replaced lock file, a full share, slow fsync, EIO
on the journal only), and runs the checker of tests/fault/checker.py. Prints
the trials run, faults injected, messages acknowledged, lost, duplicated, and
every violation with the seed that replays its trial alone. Needs root and
/dev/fuse. Exit status 1 if any trial found a violation.

    python bench/chaos.py --trials 500 --seed 1
"""

from __future__ import annotations

import argparse
import datetime
import platform
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fault.chaos import Totals, run_trial
from tests.fault.conftest import fuse_unavailable_reason


def _interrupt(signum: int, _frame: object) -> None:
    # Unwinds the running trial through its cleanup (nodes, mounts, tmpfs by pid and path);
    # installed for SIGINT too, which a shell leaves ignored for background jobs.
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1, help="trial n uses seed + n")
    parser.add_argument(
        "--max-minutes", type=float, default=None, help="stop starting trials after this long"
    )
    args = parser.parse_args(argv)
    reason = fuse_unavailable_reason()
    if reason:
        print(f"cannot run: {reason}")
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    totals = Totals()
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="primacy-chaos-"))
    try:
        for number in range(args.trials):
            if args.max_minutes is not None and time.monotonic() - started > args.max_minutes * 60:
                print(f"stopping: {args.max_minutes} min budget spent")
                break
            try:
                result = run_trial(args.seed + number, workdir / f"trial-{number}")
            except KeyboardInterrupt:
                print("interrupted: the unfinished trial is not counted")
                break
            shutil.rmtree(workdir / f"trial-{number}", ignore_errors=True)
            totals.add(result)
            verdict = result.verdict.summary() if result.verdict else "no verdict"
            print(
                f"trial {number} seed {result.seed} nodes {result.nodes} "
                f"faults {result.faults}: {verdict}",
                flush=True,
            )
            for violation in result.violations:
                print(
                    f"  VIOLATION (replay: bench/chaos.py --trials 1 --seed {result.seed}): "
                    f"{violation[:2000]}",
                    flush=True,
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed_min = (time.monotonic() - started) / 60
    print()
    print(
        f"date: {datetime.date.today()}  machine: {platform.node()} {platform.machine()}, "
        f"{platform.system()} {platform.release()}, python {platform.python_version()}"
    )
    budget = f" --max-minutes {args.max_minutes:g}" if args.max_minutes is not None else ""
    print(f"command: bench/chaos.py --trials {args.trials} --seed {args.seed}{budget}")
    print(f"trials run: {totals.trials} in {elapsed_min:.1f} min")
    print(f"faults injected: {sum(totals.faults.values())}")
    for name, count in sorted(totals.faults.items()):
        print(f"  {name}: {count}")
    print(f"acknowledged: {totals.acknowledged}")
    print(f"lost: {totals.lost}")
    print(f"duplicates: {totals.duplicates}")
    print(f"trials with violations: {len(totals.violating_trials)}")
    for result in totals.violating_trials:
        print(f"  seed {result.seed}: {result.violations[0][:300]}")
    return 1 if totals.violating_trials else 0


if __name__ == "__main__":
    sys.exit(main())
