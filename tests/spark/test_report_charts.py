"""The replay report's charts fit their data, without Spark: the chart code takes the small
aggregated rows the replay collects, so these build them by hand for journals of under a
minute, about an hour and several days, and for a single point; and the page they make is
opened in a real browser (Debian's chromium, headless), where every chart must decode and
hold drawn data."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from primacy.spark.replay_report import (
    ReportInputs,
    _throughput_figure,
    _timeline_figure,
    write_html,
    write_json,
)
from primacy.spark.tenure import Gap, Tenure

START_S = 1_795_000_000  # 2026-11-18 11:06:40 UTC: a journal of 20 s spans two minutes
NS = 1_000_000_000


def _tenure(epoch: int, node: str, from_s: float, to_s: float) -> Tenure:
    """Epoch ``epoch`` served by ``node`` from ``from_s`` until it crashed at ``to_s``."""
    start, end = int(from_s * NS), int(to_s * NS)
    return Tenure(epoch, node, start, start, end, end, "crashed", None, 10, 0)


def _journal(span_s: float) -> tuple[list[tuple[datetime, str, int]], list[Tenure], list[Gap]]:
    """Sends in every minute the journal covers, and a failover at its middle."""
    minutes = range(START_S // 60 * 60, int(START_S + span_s) // 60 * 60 + 1, 60)
    throughput = [(datetime.fromtimestamp(m, UTC), "/queue/a", 100) for m in minutes]
    middle_s = START_S + span_s / 2
    tenures = [
        _tenure(1, "a", START_S, middle_s),
        _tenure(2, "b", middle_s + 0.06, START_S + span_s),
    ]
    gap = Gap(1, 2, "a", "b", int(middle_s * NS), int((middle_s + 0.06) * NS),
              int(middle_s * NS), "crash")  # fmt: skip
    return throughput, tenures, [gap]


def _x_axis(figure: Any) -> tuple[str, tuple[float, float], list[str]]:
    """The x axis as a reader sees it: its label, its limits, the tick labels drawn."""
    figure.canvas.draw()
    (axes,) = figure.axes
    low, high = axes.get_xlim()
    ticks = [
        label.get_text()
        for label, at in zip(axes.get_xticklabels(), axes.get_xticks(), strict=True)
        if low <= at <= high
    ]
    return axes.get_xlabel(), (low, high), ticks


def _assert_fits(figure: Any, unit: str, span: float) -> None:
    """The axis is in ``unit``, from the data's start, covering ``span`` units and not much
    more, with short plain numbers as tick labels."""
    label, (low, high), ticks = _x_axis(figure)
    assert re.match(rf"{unit} since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC", label), label
    assert low <= 0 and high >= span, (low, high)
    assert high - low <= max(span * 1.1, 2.5), (low, high)  # not years around one point
    assert ticks and all(
        re.fullmatch(r"[\N{MINUS SIGN}-]?\d+(\.\d{1,2})?", tick) for tick in ticks
    ), ticks


# The journal's span; the throughput axis's unit and span in it (whole minutes: 11:06 to
# the end of the last minute), the timeline's (the tenures, from 11:06:40).
SPANS = [
    pytest.param(20.0, "seconds", 120, "seconds", 20, id="under a minute"),
    pytest.param(3_600.0, "minutes", 61, "minutes", 60, id="an hour"),
    pytest.param(3 * 86_400.0, "days", 3 + 1 / 1440, "days", 3, id="three days"),
]


@pytest.mark.parametrize(("span_s", "unit", "minutes_span", "tl_unit", "tl_span"), SPANS)
def test_each_chart_spans_the_journal_in_a_unit_it_names(
    span_s: float, unit: str, minutes_span: float, tl_unit: str, tl_span: float
) -> None:
    throughput, tenures, gaps = _journal(span_s)
    _assert_fits(_throughput_figure(throughput), unit, minutes_span)
    _assert_fits(_timeline_figure(tenures, gaps), tl_unit, tl_span)


def test_one_point_is_one_minute_wide_not_years() -> None:
    # A journal of under a minute has one row per destination: it spanned 2025 to 2029.
    figure = _throughput_figure([(datetime.fromtimestamp(START_S // 60 * 60, UTC), "/queue/a", 7)])
    _assert_fits(figure, "seconds", 60)
    (axes,) = figure.axes
    (steps,) = axes.patches
    assert steps.get_data().values.tolist() == [7]
    assert axes.get_ylim()[0] == 0 and axes.get_ylim()[1] > 7
    assert axes.get_ylabel() == "messages sent per minute"


def test_a_single_instant_timeline_is_still_an_axis_of_seconds() -> None:
    figure = _timeline_figure([_tenure(1, "a", START_S, START_S)], [])
    label, (low, high), _ = _x_axis(figure)
    assert label.startswith("seconds since 2026-11-18 11:06:40 UTC") and low < 0 < high


@pytest.mark.parametrize("span_s", [20.0, 3_600.0, 3 * 86_400.0])
def test_the_report_page_holds_every_chart(tmp_path: Path, span_s: float) -> None:
    throughput, tenures, gaps = _journal(span_s)
    inputs = ReportInputs({"share": "/srv/share"}, tenures, gaps, throughput, [(1.0, 5)], {})
    document = write_json(tmp_path / "report.json", inputs)
    write_html(tmp_path / "report.html", inputs, document)
    assert (tmp_path / "report.html").read_text().count("data:image/png;base64,") == 3


# ------------------------------------------------- in a real browser (Debian's chromium)

# Appended to a copy of the report: once the page has loaded, what the browser made of each
# chart (decoded, its size, and how many of its pixels are coloured: data, not the white
# ground or the black and grey of axes and labels) goes into the page for --dump-dom.
_BROWSER_CHECK = """<script>
window.addEventListener("load", () => {
  const charts = [...document.images].map((img) => {
    const canvas = document.createElement("canvas");
    canvas.width = img.naturalWidth;
    canvas.height = img.naturalHeight;
    let coloured = 0;
    if (img.naturalWidth > 0) {
      const context = canvas.getContext("2d");
      context.drawImage(img, 0, 0);
      const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
      for (let i = 0; i < pixels.length; i += 4) {
        const channels = [pixels[i], pixels[i + 1], pixels[i + 2]];
        if (Math.max(...channels) - Math.min(...channels) > 60) coloured++;
      }
    }
    return {alt: img.alt, complete: img.complete, width: img.naturalWidth,
            height: img.naturalHeight, coloured};
  });
  const out = document.createElement("pre");
  out.id = "browser-check";
  out.textContent = JSON.stringify(charts);
  document.body.appendChild(out);
});
</script>
"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Debian's chromium is not installed (bash .ci/setup dev installs it as root)")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("span_s", [20.0, 3_600.0, 3 * 86_400.0])
def test_a_real_browser_shows_every_chart_with_data_in_it(tmp_path: Path, span_s: float) -> None:
    browser = _chromium()
    throughput, tenures, gaps = _journal(span_s)
    inputs = ReportInputs({"share": "/srv/share"}, tenures, gaps, throughput, [(1.0, 5)], {})
    write_html(tmp_path / "report.html", inputs, write_json(tmp_path / "report.json", inputs))
    checked = tmp_path / "checked.html"
    checked.write_text((tmp_path / "report.html").read_text() + _BROWSER_CHECK)
    run = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr",
         "--virtual-time-budget=10000", "--dump-dom", checked.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    found = re.search(r'<pre id="browser-check">(.*?)</pre>', run.stdout, re.S)
    assert found, f"the page never finished loading:\n{run.stderr[-4000:]}"
    charts = json.loads(html.unescape(found.group(1)))
    assert [chart["alt"] for chart in charts] == [
        "Throughput per minute per destination", "Time in queue (send to ack)",
        "Master timeline",
    ], charts  # fmt: skip
    for chart in charts:
        assert chart["complete"] and chart["width"] > 100 and chart["height"] > 100, chart
        # Data drawn, not only axes: at least a few hundred coloured pixels per chart.
        assert chart["coloured"] > 300, chart
    # The page raised nothing in the browser (console errors are logged as "CONSOLE").
    assert "Uncaught" not in run.stderr, run.stderr[-4000:]
