"""The ActiveMQ comparison's pure parts: broker config generation and figure aggregation.

No JVM and no broker is started; marked slow only because it belongs with the
benchmark, which is never part of the fast test run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import psutil
import pytest

from bench.activemq.brokers import CpuMeter
from bench.activemq.config import (
    DEFAULTS,
    RUN_JAR,
    TUNED,
    LockerTiming,
    activemq_xml,
    java_command,
)
from bench.activemq.figures import (
    AMQ_DEFAULTS,
    AMQ_TUNED,
    AMQ_UNDER_PRIMACY,
    AMQ_UNDER_PRIMACY_WARM,
    CPU_1,
    CPU_8,
    FAILOVER,
    FAILOVER_JVM,
    FAILOVER_STOCK,
    PRIMACY,
    RSS_MASTER,
    RSS_SLAVE,
    TPUT_1,
    TPUT_1_TLS,
    TPUT_8,
    TPUT_8_TLS,
    Loss,
    Results,
    Summary,
    evaluate_targets,
    render_table,
    stock_failover_ratio,
)
from bench.activemq.run_file import Run, write_run
from primacy.cli.localgroup import wait_until

pytestmark = pytest.mark.slow

CORE = "{http://activemq.apache.org/schema/core}"


def parsed(timing: LockerTiming = TUNED, kahadb: Path = Path("/share/kahadb")) -> ET.Element:
    xml = activemq_xml(
        broker_name="amq1",
        stomp_port=61613,
        kahadb_dir=kahadb,
        data_dir=Path("/base/data"),
        timing=timing,
    )
    return ET.fromstring(xml)


@pytest.mark.parametrize(
    ("timing", "sleep_ms", "keepalive_ms"), [(DEFAULTS, "10000", "0"), (TUNED, "1000", "1000")]
)
def test_shared_file_locker_timings(timing: LockerTiming, sleep_ms: str, keepalive_ms: str) -> None:
    root = parsed(timing)
    kahadb = root.find(f"{CORE}broker/{CORE}persistenceAdapter/{CORE}kahaDB")
    assert kahadb is not None
    assert kahadb.get("directory") == "/share/kahadb"
    assert kahadb.get("lockKeepAlivePeriod") == keepalive_ms
    locker = kahadb.find(f"{CORE}locker/{CORE}shared-file-locker")
    assert locker is not None
    assert locker.get("lockAcquireSleepInterval") == sleep_ms


def test_only_a_stomp_connector_on_loopback() -> None:
    connectors = parsed().findall(
        f"{CORE}broker/{CORE}transportConnectors/{CORE}transportConnector"
    )
    assert [c.get("uri") for c in connectors] == ["stomp://127.0.0.1:61613"]


def test_paths_are_escaped_in_the_xml() -> None:
    kahadb = parsed(kahadb=Path('/tmp/a&b"c/kahadb')).find(
        f"{CORE}broker/{CORE}persistenceAdapter/{CORE}kahaDB"
    )
    assert kahadb is not None and kahadb.get("directory") == '/tmp/a&b"c/kahadb'


def test_java_command_runs_the_package_jar_in_the_foreground() -> None:
    command = java_command(base=Path("/b"), conf_file=Path("/b/conf/activemq.xml"), heap_mb=128)
    assert "-Xmx128m" in command
    assert command[-4:] == ["-jar", str(RUN_JAR), "start", "xbean:file:/b/conf/activemq.xml"]
    assert "-Dactivemq.base=/b" in command


def test_summary_and_loss() -> None:
    assert Summary.of([]) is None
    assert Summary.of([3.0, 1.0, 2.0, 10.0]) == Summary(4, 1.0, 2.5, 10.0)
    delivered = Counter({"a": 1, "b": 2, "x": 1})  # x: sent, never receipted, delivered once
    assert Loss.count(["a", "b", "c"], delivered) == Loss(receipted=3, lost=1, duplicates=1)


def results(primacy_failover_s: float, primacy_rss: int) -> Results:
    figures = Results()
    for value in (0.30, 0.35, 0.40):
        figures.add(FAILOVER, PRIMACY, value * primacy_failover_s / 0.35)
    for value in (1.5, 2.0, 2.5):
        figures.add(FAILOVER, AMQ_TUNED, value)
        figures.add(FAILOVER, AMQ_DEFAULTS, value * 3)
    figures.add(TPUT_1, PRIMACY, 1200)
    figures.add(TPUT_1, AMQ_TUNED, 1000)
    figures.add(TPUT_8, PRIMACY, 1400)
    figures.add(TPUT_8, AMQ_TUNED, 1000)
    figures.add(TPUT_1_TLS, PRIMACY, 900)
    figures.add(TPUT_1_TLS, AMQ_TUNED, 1000)
    figures.add(TPUT_8_TLS, PRIMACY, 1200)
    figures.add(TPUT_8_TLS, AMQ_TUNED, 1000)
    for metric, ours, theirs in ((CPU_1, 400e-6, 300e-6), (CPU_8, 200e-6, 250e-6)):
        figures.add(metric, PRIMACY, ours)
        figures.add(metric, AMQ_TUNED, theirs)
    for metric, theirs in ((RSS_MASTER, 200 * 2**20), (RSS_SLAVE, 100 * 2**20)):
        figures.add(metric, PRIMACY, primacy_rss)
        figures.add(metric, AMQ_TUNED, theirs)
    figures.losses[PRIMACY] = Loss(100, 0, 0)
    figures.losses[AMQ_TUNED] = Loss(100, 0, 2)
    return figures


def test_targets_are_judged_on_medians() -> None:
    figures = results(0.35, 50 * 2**20)
    for value in (0.15, 0.18, 0.30):  # stock stomp.py against primacy
        figures.add(FAILOVER_STOCK, PRIMACY, value)
    verdicts = [t.met for t in evaluate_targets(figures)]
    # stock failover median 180 ms (needs 200 ms); 1 producer 1.2x (needs 1.0x); 8 producers
    # 1.4x (needs 1.5x); over TLS 0.9x (needs 0.9x) and 1.2x (needs 1.3x); no loss
    assert verdicts == [True, True, False, True, False, True]
    assert results(0.6, 50 * 2**20).ratio(FAILOVER) == pytest.approx(0.3)
    assert stock_failover_ratio(figures) == pytest.approx(0.09)


def test_targets_without_activemq_are_not_judged() -> None:
    figures = Results()
    figures.add(TPUT_1, PRIMACY, 1000)
    targets = evaluate_targets(figures)
    assert [t.met for t in targets] == [None] * 6


def test_table_has_a_row_per_figure() -> None:
    figures = results(0.35, 50 * 2**20)
    for value in (4.0, 5.0, 6.0):  # a cold JVM start behind HAProxy
        figures.add(FAILOVER, AMQ_UNDER_PRIMACY, value)
    figures.losses[AMQ_UNDER_PRIMACY] = Loss(50, 0, 1)
    table = render_table(figures)
    assert table.count("\n") == 1 + 13  # header rule, 4 failover rows, 8 figures, losses
    assert "| master's CPU per message, 8 producers | 200 / **200** / 200 µs (n=1) |" in table
    assert "| 300 / **350** / 400 ms (n=3) | 1 500 / **2 000** / 2 500 ms (n=3) | 0.17 |" in table
    assert "0 / 2 of 100 receipted" in table
    under = "| 4 000 / **5 000** / 6 000 ms (n=3) | 1 500 / **2 000** / 2 500 ms (n=3) | 2.50 |"
    assert f"{AMQ_UNDER_PRIMACY} (left) vs {AMQ_TUNED} {under}" in table
    assert f"{AMQ_UNDER_PRIMACY}: 0 / 1 of 50 receipted" in table


def test_a_warm_standby_run_gets_its_row_and_its_target() -> None:
    figures = results(0.35, 50 * 2**20)  # ActiveMQ tuned: 1.5 / 2.0 / 2.5 s
    for value in (0.6, 0.8, 1.2):
        figures.add(FAILOVER, AMQ_UNDER_PRIMACY_WARM, value)
    table = render_table(figures)
    row = "| 600 / **800** / 1 200 ms (n=3) | 1 500 / **2 000** / 2 500 ms (n=3) | 0.40 |"
    assert f"{AMQ_UNDER_PRIMACY_WARM} (left) vs {AMQ_TUNED} {row}" in table
    for value in (0.9, 1.1, 10.0):  # its broker JVM killed: the median is over the hold-off
        figures.add(FAILOVER_JVM, AMQ_UNDER_PRIMACY_WARM, value)
    figures.losses[f"{AMQ_UNDER_PRIMACY_WARM}, guardian and JVM kills"] = Loss(80, 1, 0)
    warm = [t for t in evaluate_targets(figures) if AMQ_UNDER_PRIMACY_WARM in t.name]
    assert [(t.met, t.detail) for t in warm] == [
        (True, "ratio 0.40"),
        (False, "ratio 0.55"),
        (False, "1 / 0 of 80 receipted"),
    ]


def test_a_run_written_as_json_reads_back_to_the_same_table() -> None:
    figures = results(0.35, 50 * 2**20)
    figures.add(FAILOVER, AMQ_UNDER_PRIMACY_WARM, 0.8)
    figures.add(FAILOVER_JVM, AMQ_UNDER_PRIMACY_WARM, 0.9)
    figures.flag(FAILOVER_JVM, AMQ_UNDER_PRIMACY_WARM, 0)  # a claim-lapse kill (issue 47)
    again = Results.from_json(json.loads(json.dumps(figures.to_json())))
    assert again == figures
    assert again.flagged == {(FAILOVER_JVM.key, AMQ_UNDER_PRIMACY_WARM): [0]}
    assert render_table(again) == render_table(figures)


def test_a_run_file_written_by_the_benchmark_reads_back_for_the_pictures(tmp_path: Path) -> None:
    figures = results(0.35, 50 * 2**20)
    path = tmp_path / "run.json"
    write_run(path, figures, "2026-11-26 12:00 UTC", "abc1234", (1.5, 1.0, 0.5))
    run = Run.read(path)
    assert (run.results, run.started, run.commit, run.load_start) == (
        figures,
        "2026-11-26 12:00 UTC",
        "abc1234",
        1.5,
    )


# A child that, told to, spends 0.4 s of CPU, says so, then waits (alive) to be told again.
SPINNER = (
    "import sys, time\n"
    "sys.stdin.readline()\n"
    "end = time.process_time() + 0.4\n"
    "while time.process_time() < end: pass\n"
    "print('spun', flush=True)\n"
    "sys.stdin.readline()\n"
)


def test_the_cpu_meter_counts_the_process_tree_over_its_window_only() -> None:
    """The master's CPU per message counts its descendants (a JVM under its launcher) and
    nothing spent before ``start`` (the interpreters' start-up here)."""
    launcher = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {SPINNER!r}])"
    parent = subprocess.Popen(
        [sys.executable, "-c", launcher], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdin is not None and parent.stdout is not None
        wait_until(lambda: len(psutil.Process(parent.pid).children()) == 1, 10, "the spinner")
        meter = CpuMeter(parent.pid)
        meter.start()
        parent.stdin.write("go\n")
        parent.stdin.flush()
        assert parent.stdout.readline() == "spun\n"
        meter.stop(messages=4)
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait(10)
    assert 0.35 <= meter.seconds < 0.7
    assert meter.per_message == meter.seconds / 4
