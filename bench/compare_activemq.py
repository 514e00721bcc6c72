"""primacy side by side with ActiveMQ Classic's shared file master/slave, same machine, same run.

Starts a three-node primacy group (default settings, built-in STOMP) and
pairs of ActiveMQ 5.17 brokers from Debian's package, each pair on one shared
KahaDB directory with a shared-file-locker: one pair with ActiveMQ's default
timings (lockAcquireSleepInterval 10000 ms, lockKeepAlivePeriod 0) and one
tuned (1000 / 1000 ms). The same STOMP workload runs against each, the groups
taking turns (A B A B) so that drift in a shared machine's load hits both:

1. warm-up, then per round: RSS of master and slave; persistent throughput
   with a RECEIPT awaited per 1 KiB message, 1 producer and 8 producer
   processes (stomp.py), and the master's CPU (its node or JVM, user + system)
   per message over the same window; the queue is drained after each measurement;
2. failover: our failover client keeps sending with receipts; the master is
   killed with SIGKILL; the figure is kill -> first RECEIPT from the node
   that took over; the killed node is restarted as a slave;
3. every failover queue is drained and compared with what was receipted:
   lost and duplicated messages;
4. (unless ``--no-tls``, and run right after 1) the throughput figures over TLS: three more
   primacy nodes serving STOMP over TLS only, and the ActiveMQ pair's
   ``stomp+ssl`` connector (a PKCS12 key store of the same certificate),
   stock stomp.py trusting the run's own CA (made with openssl);
5. (unless ``--no-exec``; needs haproxy) a third group in the failover phase:
   ActiveMQ under primacy, two nodes each supervising an ActiveMQ on one
   shared KahaDB (exec mode, readiness on its STOMP port), clients through
   HAProxy checking ``/master``: kill -9 of the master's supervisor -> first
   RECEIPT through HAProxy, which includes a cold JVM start; and (unless ``--no-warm``) a
   fourth, the same with a warm standby (``exec_warm_standby``, KahaDB's locker being
   primacy's gate, HAProxy set as that recipe says), whose JVM is loaded before the
   kill; then (unless ``--no-victims``) both groups again, killing the master's
   guardian, then its broker JVM, instead. Each such kill waits until no node of the
   group holds off (``held_off_s`` on ``/status``), and a failover during which a
   guardian killed a broker for a claim confirmed late (``PRIMACY-1106``) is flagged.

Every drain acknowledges each message after counting it (``ack:client-individual``): with
``ack:auto`` a drain cut by a failover had messages acknowledged unread (issue 47).

Prints min / median / max per figure, primacy/ActiveMQ ratios of medians and
the issue's targets. ActiveMQ comes from Debian's ``activemq`` package, which
this script installs when it is missing and it runs as root (``--no-install``
to skip); without it, only primacy's figures are printed. Every process
started is killed by pid on exit, also on failure, Ctrl-C or SIGTERM; the
temporary directory is removed.

    .venv/bin/python bench/compare_activemq.py            # full, ~12 minutes on 2 cores
    .venv/bin/python bench/compare_activemq.py --quick    # ~1.5 minutes
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import platform
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.activemq.brokers import (
    ActiveMQPair,
    CpuMeter,
    HaGroup,
    PrimacyGroup,
    tree_rss_bytes,
)
from bench.activemq.config import (
    DEFAULTS,
    TUNED,
    install_activemq,
    missing_activemq,
    pkcs12_key_store,
)
from bench.activemq.failover_phases import (
    WARM_CHECK_TIMEOUT,
    WARM_CHECKS,
    WARM_CONNECT_TIMEOUT,
    failover_phase,
    victim_phase,
)
from bench.activemq.figures import (
    AMQ_DEFAULTS,
    AMQ_TUNED,
    AMQ_UNDER_PRIMACY,
    AMQ_UNDER_PRIMACY_WARM,
    CPU_1,
    CPU_8,
    PRIMACY,
    RSS_MASTER,
    RSS_SLAVE,
    TPUT_1,
    TPUT_1_TLS,
    TPUT_8,
    TPUT_8_TLS,
    Results,
    Sampling,
    evaluate_targets,
    render_table,
    render_targets,
)
from bench.activemq.progress import say, slug
from bench.activemq.run_file import checked_out_commit, write_run
from bench.activemq.under_primacy import HAPROXY, ActiveMQUnderPrimacy
from bench.activemq.watch import StoreWatch
from bench.activemq.workload import (
    drain,
    throughput,
)
from tests.harness.tls_certs import make_pki


def _terminate(signum: int, frame: FrameType | None) -> None:
    # SIGTERM unwinds like Ctrl-C, so every `finally` below kills what it started.
    raise KeyboardInterrupt(f"signal {signum}")


def measure_rss(results: Results, label: str, group: HaGroup) -> None:
    master = tree_rss_bytes(group.master_pid())
    # The largest slave: with three primacy nodes, the less favourable of two.
    slave = max(tree_rss_bytes(pid) for pid in group.slave_pids())
    results.add(RSS_MASTER, label, master)
    results.add(RSS_SLAVE, label, slave)
    say(f"  {label}: RSS master {master / 2**20:.0f} MiB, slave {slave / 2**20:.0f} MiB")


def throughput_phase(
    results: Results, groups: dict[str, HaGroup], rounds: int, seconds: float
) -> None:
    for label, group in groups.items():
        say(f"warm-up of {label}: 8 producers, then drain")
        address = group.master_address()
        throughput(address, "/queue/warmup", f"w-{slug(label)}", 8, seconds / 2, warmup_s=1.0)
        drain(address, "/queue/warmup")
    for round_number in range(1, rounds + 1):
        say(f"round {round_number}/{rounds}: RSS and throughput")
        for label, group in groups.items():
            measure_rss(results, label, group)
        for producers, metric, cpu_metric in ((1, TPUT_1, CPU_1), (8, TPUT_8, CPU_8)):
            for label, group in groups.items():
                queue = f"/queue/tput-{round_number}-{producers}"
                tag = f"r{round_number}-{producers}-{slug(label)}"
                address = group.master_address()
                meter = CpuMeter(group.master_pid())
                rate = throughput(address, queue, tag, producers, seconds, meter=meter)
                results.add(metric, label, rate)
                results.add(cpu_metric, label, meter.per_message)
                drained = drain(address, queue)
                say(
                    f"  {label}, {producers} producer(s): {rate:,.0f} msg/s, master's CPU "
                    f"{meter.per_message * 1e6:,.0f} µs/message ({sum(drained.values())} drained)"
                )


def tls_phase(
    results: Results, primacy_tls: PrimacyGroup, amq: ActiveMQPair | None, ca: Path, rounds: int,
    seconds: float,
) -> None:  # fmt: skip
    """The throughput figures again, over TLS: a primacy group serving STOMP over TLS only,
    and the same ActiveMQ pair's stomp+ssl connector; stock stomp.py trusting the test CA."""
    targets: dict[str, Callable[[], tuple[str, int]]] = {PRIMACY: primacy_tls.master_address}
    if amq is not None:
        targets[AMQ_TUNED] = amq.master_tls_address
    for label, address_of in targets.items():
        say(f"TLS warm-up of {label}")
        throughput(address_of(), "/queue/warmup-tls", f"wt-{slug(label)}", 8, seconds / 2,
                   warmup_s=1.0, tls_ca=str(ca))  # fmt: skip
        drain(address_of(), "/queue/warmup-tls", tls_ca=str(ca))
    for round_number in range(1, rounds + 1):
        say(f"TLS round {round_number}/{rounds}")
        for producers, metric in ((1, TPUT_1_TLS), (8, TPUT_8_TLS)):
            for label, address_of in targets.items():
                queue = f"/queue/tls-{round_number}-{producers}"
                tag = f"t{round_number}-{producers}-{slug(label)}"
                rate = throughput(address_of(), queue, tag, producers, seconds, tls_ca=str(ca))
                results.add(metric, label, rate)
                drain(address_of(), queue, tls_ca=str(ca))
                say(f"  {label} over TLS, {producers} producer(s): {rate:,.0f} msg/s")


def run(args: argparse.Namespace) -> Results:
    results = Results()
    workdir = Path(tempfile.mkdtemp(prefix="primacy-bench-activemq-", dir=args.dir))
    started: list[PrimacyGroup | ActiveMQPair | ActiveMQUnderPrimacy] = []
    watches: dict[str, StoreWatch] = {}  # each supervised group's brokers, sampled throughout
    try:
        if not args.no_install:
            install_activemq(say)
        why_not = missing_activemq()
        if why_not:
            say(f"ActiveMQ figures SKIPPED: {why_not}; primacy's figures only")
        say("starting 3 primacy nodes (defaults) with STOMP")
        primacy = PrimacyGroup(workdir / "primacy", nodes=3)
        started.append(primacy)
        primacy.start()
        groups: dict[str, HaGroup] = {PRIMACY: primacy}
        pki = None if args.no_tls else make_pki(workdir / "pki")
        tuned = None
        if not why_not:
            say(f"starting 2 ActiveMQ brokers, {TUNED.describe()}, -Xmx{args.heap_mb}m")
            key_store = None
            if pki is not None:
                store = pkcs12_key_store(pki.cert, pki.key, workdir / "broker.p12", "bench-secret")
                key_store = (store, "bench-secret")
            tuned = ActiveMQPair(workdir / "amq-tuned", TUNED, args.heap_mb, key_store)
            started.append(tuned)
            tuned.start()
            groups[AMQ_TUNED] = tuned
        throughput_phase(results, groups, args.rounds, args.seconds)
        if pki is not None:
            say("starting 3 more primacy nodes serving STOMP over TLS")
            tls_args = ("--stomp-tls-cert", str(pki.cert), "--stomp-tls-key", str(pki.key))
            primacy_tls = PrimacyGroup(workdir / "primacy-tls", nodes=3, extra_args=tls_args)
            started.append(primacy_tls)
            primacy_tls.start()
            tls_phase(results, primacy_tls, tuned, pki.ca, args.rounds, args.seconds)
            primacy_tls.close()
        if not why_not and args.default_kills:
            say(f"starting 2 ActiveMQ brokers, {DEFAULTS.describe()}")
            defaults = ActiveMQPair(workdir / "amq-defaults", DEFAULTS, args.heap_mb)
            started.append(defaults)
            defaults.start()
            groups[AMQ_DEFAULTS] = defaults
        if not why_not and not args.no_exec and HAPROXY is not None:
            say("starting ActiveMQ under primacy: 2 nodes in exec mode behind HAProxy")
            under = ActiveMQUnderPrimacy(workdir / "amq-under-primacy", args.heap_mb)
            started.append(under)
            under.start()
            groups[AMQ_UNDER_PRIMACY] = under
            watches[AMQ_UNDER_PRIMACY] = StoreWatch(under).__enter__()
            if not args.no_warm and shutil.which("javac") is None:
                say("ActiveMQ under primacy, warm, SKIPPED: no javac for its gate's locker")
            elif not args.no_warm:
                say("starting ActiveMQ under primacy with a warm standby behind its gate")
                warm = ActiveMQUnderPrimacy(
                    workdir / "amq-warm",
                    args.heap_mb,
                    warm=True,
                    haproxy_checks=None if args.warm_checks == "guide" else args.warm_checks,
                    haproxy_connect_timeout=(
                        None if args.warm_connect_timeout == "guide" else args.warm_connect_timeout
                    ),
                    haproxy_check_timeout=(
                        None if args.warm_checks == "guide" else WARM_CHECK_TIMEOUT
                    ),
                )
                started.append(warm)
                warm.start()
                groups[AMQ_UNDER_PRIMACY_WARM] = warm
                watches[AMQ_UNDER_PRIMACY_WARM] = StoreWatch(warm).__enter__()
        elif not args.no_exec:
            say("ActiveMQ under primacy SKIPPED: it needs ActiveMQ and haproxy")
        say(f"failover: {args.kills} kills per group ({args.default_kills} for ActiveMQ defaults)")
        failover_phase(results, groups, args.kills, args.default_kills)
        supervised = {
            label: group
            for label, group in groups.items()
            if isinstance(group, ActiveMQUnderPrimacy)
        }
        if supervised and not args.no_victims:
            say(f"failover from the master's guardian, then its JVM: {args.kills} kills each")
            victim_phase(results, supervised, args.kills)
        for label, watch in watches.items():
            watch.__exit__()
            results.sampling[label] = Sampling(watch.store_samples, watch.two_at_once())
            say(f"  {label}: two brokers at once in {results.sampling[label].show()}")
    finally:
        for watch in watches.values():
            watch.__exit__()
        say("stopping every process started (by pid)")
        for group in reversed(started):
            group.close()
        if results.lost_ids:
            # The nodes' logs, the brokers' and KahaDB's files: what tells a loss from a bug
            # of the benchmark's own.
            for key, ids in results.lost_ids.items():
                (workdir / f"lost-{slug(key)}.txt").write_text("".join(f"{i}\n" for i in ids))
            say(f"receipted messages were lost: the run's files are kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a short run (~1.5 minutes)")
    parser.add_argument("--dir", type=Path, help="where to make the temporary directory")
    parser.add_argument("--rounds", type=int, help="throughput/RSS rounds (default 6; quick 1)")
    parser.add_argument("--seconds", type=float, help="per throughput figure (default 10; quick 3)")
    parser.add_argument("--kills", type=int, help="kills of primacy and ActiveMQ tuned (30; 3)")
    parser.add_argument(
        "--default-kills", type=int, help="kills of ActiveMQ with default timings (10; 2)"
    )
    parser.add_argument(
        "--no-install",
        action="store_true",
        help="do not try to install Debian's activemq package when it is missing (as root)",
    )
    parser.add_argument("--heap-mb", type=int, default=256, help="ActiveMQ -Xmx (default 256)")
    parser.add_argument(
        "--no-tls", action="store_true", help="skip the throughput figures over TLS"
    )
    parser.add_argument(
        "--no-exec",
        action="store_true",
        help="skip the failover figures of ActiveMQ under primacy (exec mode behind HAProxy)",
    )
    parser.add_argument(
        "--no-victims",
        action="store_true",
        help="skip the kills of the master's guardian and JVM under primacy",
    )
    parser.add_argument(
        "--warm-checks",
        metavar="TIMINGS",
        default=WARM_CHECKS,
        help="HAProxy's check timings for the warm group (default: the warm recipe's "
        f"'{WARM_CHECKS}'; 'guide' for the operator guide's general example)",
    )
    parser.add_argument(
        "--warm-connect-timeout",
        metavar="TIME",
        default=WARM_CONNECT_TIMEOUT,
        help="HAProxy's 'timeout connect' for the warm group (default: the warm recipe's "
        f"{WARM_CONNECT_TIMEOUT}; 'guide' for the general example's 2s)",
    )
    parser.add_argument(
        "--no-warm",
        action="store_true",
        help="skip the failover figures of ActiveMQ under primacy with a warm standby",
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write every sample, the command, commit and load to PATH "
        "(what bench/pictures.py draws from)",
    )
    args = parser.parse_args()
    for name, full, quick in (
        ("rounds", 6, 1),
        ("seconds", 10.0, 3.0),
        ("kills", 30, 3),
        ("default_kills", 10, 2),
    ):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    signal.signal(signal.SIGTERM, _terminate)
    # Also when started in the background by a shell, which would have SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # Our failover client warns on every lost connection; here each is an expected kill.
    logging.getLogger("primacy.client").setLevel(logging.ERROR)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    say(
        f"{now}; python {platform.python_version()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}; command: {' '.join(sys.argv)}"
    )
    load_at_start = os.getloadavg()
    commit = checked_out_commit()  # what runs is what was checked out at the start
    results = run(args)
    if args.json is not None:
        write_run(args.json, results, now, commit, load_at_start)
        say(f"samples written to {args.json}")
    print()
    print(render_table(results))
    for (key, group), indexes in results.flagged.items():
        values = results.samples[(key, group)]
        shown = ", ".join(f"#{i + 1} {values[i] * 1000:.0f} ms" for i in indexes)
        print(f"flagged (a claim-lapse kill during the failover): {key}, {group}: {shown}")
    print()
    print("targets (medians; ActiveMQ tuned):")
    print(render_targets(evaluate_targets(results)))
    print(f"load average at the end: {' / '.join(f'{v:.1f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
