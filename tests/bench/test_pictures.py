"""bench/pictures.py: the pictures and the results block of docs/benchmarks.md, drawn from a
run's JSON (compare_run.json here: the format compare_activemq.py --json writes, small)."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench.activemq.figures import evaluate_targets, render_table, render_targets
from bench.pictures import (
    FAILOVER_SVG,
    PAGE_END,
    PAGE_START,
    THROUGHPUT_SVG,
    Run,
    main,
)

RUN = Path(__file__).with_name("compare_run.json")
PAGE = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
SVG = "{http://www.w3.org/2000/svg}"
EVERY_GROUP = [
    "primacy",
    "primacy, stock stomp.py",
    "ActiveMQ tuned",
    "ActiveMQ defaults",
    "ActiveMQ under primacy",
    "ActiveMQ under primacy, warm",
]


def texts(svg: Path, group_id: str | None = None) -> list[str]:
    """The text a reader sees in the picture (or in one of its parts: ``legend_1``)."""
    root = ET.parse(svg).getroot()
    assert root.tag == f"{SVG}svg"
    if group_id is not None:
        [part] = [g for g in root.iter(f"{SVG}g") if g.get("id") == group_id]
        root = part
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def draw(run: Path, tmp_path: Path, page_text: str | None = None) -> tuple[Path, str]:
    out = tmp_path / "pictures"
    page = tmp_path / "benchmarks.md"
    tmp_path.mkdir(exist_ok=True)
    page.write_text(page_text or f"# Benchmarks\n\n{PAGE_START} -->\nold\n{PAGE_END}\n\nmore\n")
    main([str(run), "--out", str(out), "--page", str(page)])
    return out, page.read_text()


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The fixture run drawn once (matplotlib takes seconds), its block in a test page."""
    return draw(RUN, tmp_path_factory.mktemp("drawn"))


def test_the_failover_picture_shows_every_group_of_every_kill(drawn: tuple[Path, str]) -> None:
    out, _ = drawn
    legend = texts(out / FAILOVER_SVG, "legend_1")
    assert legend == EVERY_GROUP
    seen = texts(out / FAILOVER_SVG)
    # One panel per kind of kill, the groups measured on it, each median written beside them.
    for title in (
        "kill -9 of the master (under primacy: of the master's supervisor)",
        "kill -9 of the master's guardian → first RECEIPT",
        "kill -9 of the master's broker JVM → first RECEIPT",
    ):
        assert title in seen
    for median in ("270 ms (n=3)", "415 ms (n=3)", "1 985 ms (n=3)", "2 163 ms (n=2)"):
        assert median in seen  # primacy, its stock client, ActiveMQ tuned and defaults
    for median in ("932 ms (n=3)", "952 ms (n=2)", "890 ms (n=2)"):
        assert median in seen  # the warm standby: supervisor, guardian, JVM
    assert "kill -9 → first RECEIPT from the new master (ms, log scale)" in seen


def test_the_throughput_picture_puts_primacy_beside_activemq_by_producers(
    drawn: tuple[Path, str],
) -> None:
    out, _ = drawn
    assert texts(out / THROUGHPUT_SVG, "legend_1") == ["primacy", "ActiveMQ tuned"]
    seen = texts(out / THROUGHPUT_SVG)
    assert {"plain STOMP", "STOMP over TLS", "1 producer", "8 producers"} <= set(seen)
    # The medians of the fixture: 1 and 8 producers, plain and TLS, primacy and ActiveMQ.
    for median in ("1 483", "2 156", "4 134", "3 268", "1 112", "1 512", "2 216", "2 452"):
        assert median in seen


def test_the_page_gets_the_run_its_pictures_and_the_figures_table(
    drawn: tuple[Path, str],
) -> None:
    out, page = drawn
    run = Run.read(RUN)
    block = page[page.index(PAGE_START) : page.index(PAGE_END)]
    assert page.startswith("# Benchmarks\n\n") and page.endswith(f"{PAGE_END}\n\nmore\n")
    assert "old" not in block
    assert "**Run of 2026-11-26 12:00 UTC**, commit `0a3384c`" in block
    assert "python 3.11.2 on 2 cores, load average 0.8 at the start and 1.6 at the end" in block
    assert f"`{run.command}`" in block
    assert render_table(run.results) in block
    assert render_targets(evaluate_targets(run.results)) in block
    links = re.findall(r"!\[[^]]+\]\(([^)]+)\)", block)
    assert [(out.parent / link).resolve() for link in links] == [
        (out / FAILOVER_SVG).resolve(),
        (out / THROUGHPUT_SVG).resolve(),
    ]


def test_a_run_without_activemq_tls_or_victims_draws_only_what_it_measured(
    tmp_path: Path,
) -> None:
    document = json.loads(RUN.read_text())
    document["samples"] = [
        s
        for s in document["samples"]
        if s["group"] == "primacy" and s["metric"] in {"failover", "tput1", "tput8"}
    ]
    document["losses"] = {"primacy": document["losses"]["primacy"]}
    small = tmp_path / "primacy-only.json"
    small.write_text(json.dumps(document))
    out, page = draw(small, tmp_path)
    assert texts(out / FAILOVER_SVG, "legend_1") == ["primacy"]
    seen = texts(out / FAILOVER_SVG)
    assert not any("guardian" in text or "JVM" in text for text in seen)
    assert texts(out / THROUGHPUT_SVG, "legend_1") == ["primacy"]
    assert "STOMP over TLS" not in texts(out / THROUGHPUT_SVG)
    assert "kill -9 → first RECEIPT on stock stomp.py ≤ 200 ms (issue 30): not measured" in page
    assert "1 producer ≥ 1.0 times ActiveMQ (issue 49): not measured (no ActiveMQ figure" in page


def test_drawing_a_run_again_gives_the_same_files(drawn: tuple[Path, str], tmp_path: Path) -> None:
    """No date, no random ids: a page regenerated from the same run shows no diff."""
    first, _ = drawn
    again, _ = draw(RUN, tmp_path)
    for name in (FAILOVER_SVG, THROUGHPUT_SVG):
        assert (first / name).read_bytes() == (again / name).read_bytes()
        assert "<dc:date>" not in (first / name).read_text()


def test_the_benchmarks_page_has_the_block_the_script_fills(tmp_path: Path) -> None:
    """The one command at the top of docs/benchmarks.md works on the page as it is."""
    text = PAGE.read_text()
    assert "bench/pictures.py" in text[: text.index("\n## ")]
    _, page = draw(RUN, tmp_path, text)
    assert page.count(PAGE_START) == page.count(PAGE_END) == 1
    assert render_table(Run.read(RUN).results) in page


def test_a_run_without_throughput_leaves_no_earlier_throughput_picture(
    drawn: tuple[Path, str], tmp_path: Path
) -> None:
    document = json.loads(RUN.read_text())
    document["samples"] = [s for s in document["samples"] if s["metric"].startswith("failover")]
    failovers_only = tmp_path / "failovers-only.json"
    failovers_only.write_text(json.dumps(document))
    earlier, _ = drawn
    out = tmp_path / "pictures"
    shutil.copytree(earlier, out)  # the last run's pictures, as docs/pictures holds them
    _, page = draw(failovers_only, tmp_path)
    assert sorted(path.name for path in out.iterdir()) == [FAILOVER_SVG]
    assert THROUGHPUT_SVG not in page
