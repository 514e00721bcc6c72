"""Chaos: random shared-storage faults on groups on emulated NFS mounts, judged by the checker.

Each trial starts a fresh 2- or 3-node group, each node on its own emulated
NFSv4 host (tests/harness/nfsemu), runs two producers and a consumer with
failover URLs, injects one to three random faults (partitions past and short
of the lease, SIGSTOP plus a replaced lock file, a full share, slow fsync, EIO
on the journal only, crafted files planted before a takeover: a CRC-valid
checkpoint holding 1e999 or 10**30, a far-epoch segment with a valid header),
and runs the checker of tests/harness/checker.py. Prints
the trials run, faults injected, messages acknowledged, lost, duplicated, and
every violation with the seed that replays its trial alone. Needs root and
/dev/fuse. Exit status 1 if any trial found a violation.

    python bench/chaos.py --trials 500 --seed 1 --jobs 2

With ``--coordination zookeeper`` the group's lock and epochs are on a
three-server ZooKeeper ensemble the run starts on loopback (Debian's zookeeper
package and a JDK), the share is a local directory, and the faults are the
coordination service's: the master's session expired (frozen past it), a short
freeze, one server killed, quorum lost, the master cut off from every server
past its session or briefly (tests/harness/zookeeper_chaos.py). The trials share
the ensemble, so they run one at a time.

    python bench/chaos.py --coordination zookeeper --trials 100 --seed 1

``--server ganesha`` runs the trials on a real NFSv4 server instead (issue 29,
tests/harness/chaos_real_nfs.py): nfs-ganesha in a network namespace per trial,
libnfs hosts behind links a trial cuts, and the real server's faults (link
cuts, a frozen client, a host crash, a server restart, a slow server). It
also needs network namespaces and `.ci/setup dev`'s Debian packages.

``--event-loop`` is every node's STOMP loop (``stomp_event_loop``): ``auto`` (uvloop
where installed), ``uvloop``, ``asyncio``, or ``alternate``: trial n on uvloop when n
is even, asyncio when odd. The summary gives each loop's trials, lost, duplicated and
violating trials (issue 49: the chaos run on both loops).

    python bench/chaos.py --trials 500 --seed 1 --jobs 2 --event-loop alternate

A trial spends most of its time waiting (for leases to expire, for a group to
serve again), about half a core on average, so ``--jobs 2`` runs two trials at
once in their own worker processes and halves the wall time on two cores. The
trials share nothing (each has its own tmpfs share, mounts, ports and control
sockets); only the printed order of finished trials changes.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primacy.broker.event_loop import EventLoopKind, resolve
from tests.harness import zookeeper_chaos
from tests.harness.chaos import FAULTS, Totals, TrialResult, run_trial
from tests.harness.chaos_real_nfs import REAL_FAULTS, run_real_trial
from tests.harness.emulated_hosts import fuse_unavailable_reason
from tests.harness.ganesha.server import real_nfs_unavailable_reason
from tests.harness.zookeeper import running_ensemble
from tests.harness.zookeeper import unavailable_reason as zookeeper_unavailable_reason


def _interrupt(signum: int, _frame: object) -> None:
    # Unwinds the running trial through its cleanup (nodes, mounts, tmpfs by pid and path);
    # installed for SIGINT too, which a shell leaves ignored for background jobs.
    raise KeyboardInterrupt(f"signal {signum}")


def _worker_init() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)


def trial_loop(choice: str, number: int) -> EventLoopKind:
    """The STOMP loop of trial ``number`` under ``--event-loop choice``."""
    if choice == "alternate":
        return "uvloop" if number % 2 == 0 else "asyncio"
    if choice == "uvloop" or choice == "asyncio":
        return choice
    return resolve("auto")


def _trial_in_worker(
    seed: int,
    workdir: Path,
    keep_logs: Path | None = None,
    fault: str | None = None,
    server: str = "emulated",
    event_loop: EventLoopKind | None = None,
) -> TrialResult:
    try:
        if server == "ganesha":
            result = run_real_trial(seed, workdir, fault)
        else:
            result = run_trial(seed, workdir, fault, event_loop)
        if result.violations and keep_logs is not None:
            # The nodes' and the emulated hosts' logs: a timing-dependent failure may not
            # come back when its seed is replayed.
            kept = keep_logs / f"seed-{seed}"
            for log in workdir.rglob("*.log"):  # run_trial has unmounted every share by now
                target = kept / log.relative_to(workdir)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log, target)
            print(f"  logs of seed {seed} kept in {kept}", flush=True)
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _report(number: int, result: TrialResult) -> None:
    verdict = result.verdict.summary() if result.verdict else "no verdict"
    print(
        f"trial {number} seed {result.seed} nodes {result.nodes} {result.event_loop} "
        f"faults {result.faults}: {verdict}",
        flush=True,
    )
    for violation in result.violations:
        print(
            f"  VIOLATION (replay: bench/chaos.py --trials 1 --seed {result.seed}): "
            f"{violation[:2000]}",
            flush=True,
        )


def _run_trials(args: argparse.Namespace, workdir: Path, totals: Totals, started: float) -> None:
    """Keep ``args.jobs`` trials running until every trial ran or the time budget is spent."""
    numbers = iter(range(args.trials))
    running: dict[Future[TrialResult], int] = {}
    context = multiprocessing.get_context("spawn")  # no FUSE or thread state forked along
    pool = ProcessPoolExecutor(args.jobs, mp_context=context, initializer=_worker_init)
    try:
        while True:
            budget_spent = (
                args.max_minutes is not None and time.monotonic() - started > args.max_minutes * 60
            )
            while len(running) < args.jobs and not budget_spent:
                number = next(numbers, None)
                if number is None:
                    break
                future = pool.submit(
                    _trial_in_worker,
                    args.seed + number,
                    workdir / f"trial-{number}",
                    args.keep_logs,
                    args.fault,
                    args.server,
                    trial_loop(args.event_loop, number),
                )
                running[future] = number
            if not running:
                if budget_spent:
                    print(f"stopping: {args.max_minutes} min budget spent")
                return
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                number = running.pop(future)
                result = future.result()
                totals.add(result)
                _report(number, result)
    except KeyboardInterrupt:
        print("interrupted: unfinished trials are not counted")
        for process in list(getattr(pool, "_processes", {}).values()):
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGTERM)  # each unwinds its trial's cleanup
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1, help="trial n uses seed + n")
    parser.add_argument(
        "--max-minutes", type=float, default=None, help="stop starting trials after this long"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="trials run at once, each in its own process"
    )
    parser.add_argument(
        "--keep-logs",
        type=Path,
        default=None,
        metavar="DIR",
        help="copy the logs of every trial with a violation into DIR/seed-N",
    )
    parser.add_argument(
        "--server",
        choices=["emulated", "ganesha"],
        default="emulated",
        help="the NFS emulator on FUSE, or a real NFSv4 server (nfs-ganesha, libnfs hosts)",
    )
    parser.add_argument(
        "--fault",
        choices=sorted({*FAULTS, *REAL_FAULTS, *zookeeper_chaos.FAULTS}),
        default=None,
        help="inject only this kind of fault (default: each drawn at random)",
    )
    parser.add_argument(
        "--coordination",
        choices=("share", "zookeeper"),
        default="share",
        help="where the lock and epochs live: the emulated NFS share, or a ZooKeeper ensemble",
    )
    parser.add_argument(
        "--event-loop",
        choices=("auto", "uvloop", "asyncio", "alternate"),
        default="auto",
        help="every node's STOMP loop; alternate: uvloop for even trials, asyncio for odd",
    )
    args = parser.parse_args(argv)
    if args.event_loop != "auto" and (args.server != "emulated" or args.coordination != "share"):
        parser.error("--event-loop applies to the emulated share's trials only")
    if args.jobs < 1 or args.trials < 0:
        parser.error("--jobs must be at least 1 and --trials at least 0")
    if args.coordination == "zookeeper" and args.server != "emulated":
        parser.error("--coordination zookeeper keeps the share local: no --server with it")
    if args.coordination == "zookeeper":
        faults, of = zookeeper_chaos.FAULTS, f"--coordination {args.coordination}"
    else:
        faults = REAL_FAULTS if args.server == "ganesha" else FAULTS
        of = f"--server {args.server}"
    if args.fault is not None and args.fault not in faults:
        parser.error(f"--fault {args.fault!r} is not a fault of {of}")
    if args.coordination == "zookeeper" and args.jobs != 1:
        parser.error("--coordination zookeeper runs one trial at a time (they share the ensemble)")
    if args.coordination == "zookeeper":
        reason = zookeeper_unavailable_reason()
    else:
        reason = fuse_unavailable_reason() or (
            real_nfs_unavailable_reason() if args.server == "ganesha" else None
        )
    if reason:
        print(f"cannot run: {reason}")
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    totals = Totals()
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="primacy-chaos-"))
    try:
        if args.coordination == "zookeeper":
            _run_zookeeper_trials(args, workdir, totals, started)
        elif args.jobs == 1:
            _run_trials_here(args, workdir, totals, started)
        else:
            _run_trials(args, workdir, totals, started)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed_min = (time.monotonic() - started) / 60
    print()
    print(
        f"date: {datetime.date.today()}  machine: {platform.node()} {platform.machine()}, "
        f"{platform.system()} {platform.release()}, python {platform.python_version()}"
    )
    budget = f" --max-minutes {args.max_minutes:g}" if args.max_minutes is not None else ""
    jobs = f" --jobs {args.jobs}" if args.jobs > 1 else ""
    coordination = " --coordination zookeeper" if args.coordination == "zookeeper" else ""
    server = f" --server {args.server}" if args.server != "emulated" else ""
    only = f" --fault {args.fault!r}" if args.fault else ""
    loop = f" --event-loop {args.event_loop}" if args.event_loop != "auto" else ""
    print(
        f"command: bench/chaos.py{coordination}{server} --trials {args.trials} --seed {args.seed}"
        f"{budget}{jobs}{only}{loop}"
    )
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
    print("per event loop:")
    for name, share in sorted(totals.by_loop.items()):
        print(
            f"  {name}: {share.trials} trials, {share.lost} lost, {share.duplicates} "
            f"duplicated, {share.violating_trials} with violations"
        )
    return 1 if totals.violating_trials else 0


def _run_trials_here(
    args: argparse.Namespace, workdir: Path, totals: Totals, started: float
) -> None:
    """One trial at a time in this process (``--jobs 1``): the simplest to debug."""
    for number in range(args.trials):
        if args.max_minutes is not None and time.monotonic() - started > args.max_minutes * 60:
            print(f"stopping: {args.max_minutes} min budget spent")
            return
        try:
            result = _trial_in_worker(
                args.seed + number,
                workdir / f"trial-{number}",
                args.keep_logs,
                args.fault,
                args.server,
                trial_loop(args.event_loop, number),
            )
        except KeyboardInterrupt:
            print("interrupted: the unfinished trial is not counted")
            return
        totals.add(result)
        _report(number, result)


def _run_zookeeper_trials(
    args: argparse.Namespace, workdir: Path, totals: Totals, started: float
) -> None:
    """One trial at a time on one ensemble, started here and stopped by pid at the end."""
    with running_ensemble(workdir / "zookeeper") as ensemble:
        for number in range(args.trials):
            if args.max_minutes is not None and time.monotonic() - started > args.max_minutes * 60:
                print(f"stopping: {args.max_minutes} min budget spent")
                return
            trial_dir = workdir / f"trial-{number}"
            try:
                result = zookeeper_chaos.run_trial(
                    args.seed + number, trial_dir, ensemble, args.fault
                )
            except KeyboardInterrupt:
                print("interrupted: the unfinished trial is not counted")
                return
            if result.violations and args.keep_logs is not None:
                kept = args.keep_logs / f"seed-{result.seed}"
                shutil.copytree(trial_dir, kept, ignore=shutil.ignore_patterns("share"))
                print(f"  logs of seed {result.seed} kept in {kept}", flush=True)
            shutil.rmtree(trial_dir, ignore_errors=True)
            totals.add(result)
            _report(number, result)


if __name__ == "__main__":
    sys.exit(main())
