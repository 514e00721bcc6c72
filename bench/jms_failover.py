"""ActiveMQ's own JMS client through failovers: kill -9 of the master → its first send acknowledged
by the other broker, with the failover URL's options the operator guide gives and with
ActiveMQ's defaults, for ActiveMQ under primacy (warm standby) and ActiveMQ's own shared-file
master/slave (tuned), in one run.

What an ActiveMQ user sees: ``failover:(tcp://a,tcp://b)`` straight to the brokers' OpenWire
ports (no HAProxy), one producer sending persistent messages one at a time (each returns once
acknowledged), 5 ms apart. Under primacy the victim is the master's supervisor (its guardian
then kills the JVM); ActiveMQ's own pair loses its master JVM. At the end every acknowledged
send must come out again.

    .venv/bin/python bench/jms_failover.py [--kills 10]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.activemq.brokers import ActiveMQPair
from bench.activemq.config import TUNED, missing_activemq
from bench.activemq.figures import Summary, number
from bench.activemq.jms import RECIPE_OPTIONS, JmsClient, failover_url
from bench.activemq.under_primacy import HAPROXY, NODES, ActiveMQUnderPrimacy
from bench.activemq.watch import StoreWatch
from primacy.cli.localgroup import wait_until

SENDS_BETWEEN_KILLS = 200
OUTAGE_TIMEOUT_S = 120.0
_started = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - _started:6.1f} s] {message}", flush=True)


@dataclass
class Row:
    group: str
    options: str
    outages: list[float]
    acknowledged: int = 0
    lost: int = 0


def measure(
    label: str,
    options: str,
    ports: list[int],
    kill: Callable[[], float],
    restore: Callable[[], None],
    kills: int,
    classes: Path,
) -> Row:
    client = JmsClient(classes, failover_url(ports, options))
    row = Row(label, options or "(ActiveMQ's defaults)", [])
    try:
        client.send(10**9, pause_ms=5)
        for index in range(kills):
            client.wait_sent(len(client.acknowledged) + SENDS_BETWEEN_KILLS, OUTAGE_TIMEOUT_S)
            killed_at = kill()
            after = client.first_on_another_broker(killed_at, OUTAGE_TIMEOUT_S)
            row.outages.append(after.at - killed_at)
            say(f"  {label}, {row.options}, kill {index + 1}: {row.outages[-1] * 1000:.0f} ms")
            restore()
        client.stop()
        sent = client.sent
        received = set(client.receive(expected=len(sent)))
        row.acknowledged, row.lost = len(sent), len(set(sent) - received)
        say(f"  {label}, {row.options}: lost {row.lost} of {number(row.acknowledged)}")
    finally:
        client.close()
    return row


def run_primacy(workdir: Path, kills: int, options: list[str]) -> tuple[list[Row], int]:
    amq = ActiveMQUnderPrimacy(workdir / "warm", 256, warm=True, openwire=True)
    watch = StoreWatch(amq)
    rows = []
    try:
        with watch:
            amq.start()

            def loaded() -> None:
                amq.restore()
                wait_until(lambda: len(watch.running()) == 2, 120, "the standby's JVM to load")

            loaded()
            ports = [amq.openwire_ports[node_id] for node_id in NODES]
            for option in options:
                rows.append(
                    measure(amq.label, option, ports, amq.kill_master, loaded, kills, workdir)
                )
    finally:
        amq.close()
    return rows, watch.two_at_once()


def run_activemq(workdir: Path, kills: int, options: list[str]) -> list[Row]:
    pair = ActiveMQPair(workdir / "tuned", TUNED, 256, openwire=True)
    rows = []
    try:
        pair.start()
        for option in options:
            rows.append(
                measure(
                    pair.label,
                    option,
                    pair.openwire_ports,
                    pair.kill_master,
                    pair.restore,
                    kills,
                    workdir,
                )
            )
    finally:
        pair.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=10, help="kills per group and URL (10)")
    parser.add_argument(
        "--no-defaults", action="store_true", help="only the guide's URL options, not the defaults"
    )
    args = parser.parse_args()
    why_not = missing_activemq()
    if why_not or HAPROXY is None or shutil.which("javac") is None:
        sys.exit(f"needs Debian's activemq, haproxy and a JDK: {why_not or 'haproxy/javac'}")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    say(f"{now}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {' '.join(sys.argv)}")
    options = [RECIPE_OPTIONS] if args.no_defaults else [RECIPE_OPTIONS, ""]
    workdir = Path(tempfile.mkdtemp(prefix="primacy-bench-jms-"))
    try:
        say("ActiveMQ under primacy, warm standby, 2 nodes")
        rows, two_at_once = run_primacy(workdir, args.kills, options)
        say("ActiveMQ's own shared-file master/slave, tuned, 2 brokers")
        rows += run_activemq(workdir, args.kills, options)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(
        "| kill -9 of the master → first send acknowledged by the other broker | URL options "
        "| min / **median** / max | lost |"
    )
    print("| --- | --- | --- | --- |")
    for row in rows:
        summary = Summary.of(row.outages)
        shown = (
            "—"
            if summary is None
            else (
                f"{number(summary.minimum * 1000)} / **{number(summary.median * 1000)}** / "
                f"{number(summary.maximum * 1000)} ms (n={summary.n})"
            )
        )
        options = row.options if row.options.startswith("(") else f"`{row.options}`"
        print(f"| {row.group} | {options} | {shown} | {row.lost} of {number(row.acknowledged)} |")
    print(f"\nActiveMQ under primacy: two brokers at once in {two_at_once} samples (every 10 ms)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
