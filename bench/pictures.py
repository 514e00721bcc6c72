"""The pictures and the results table of docs/benchmarks.md, drawn from one comparison run.

Reads what ``bench/compare_activemq.py --json RUN.json`` wrote (every sample, the command,
the commit, the machine's cores and load) and writes, from that one file:

- ``failover.svg``: the time from a kill -9 to the first RECEIPT, every sample of every
  group (primacy, ActiveMQ tuned and with its defaults, ActiveMQ under primacy cold and
  warm), one panel per kind of kill the run made (the master, its guardian, its broker JVM);
- ``throughput.svg``: persistent throughput by producer count, primacy beside ActiveMQ
  tuned, plain STOMP and (when the run measured it) STOMP over TLS;
- the Markdown of the run: how it was made, the pictures, bench/activemq/figures.py's table
  and its verdict on each target. Printed, and with ``--page`` written into that page
  between its ``<!-- results of bench/pictures.py`` and ``<!-- end of the results -->``
  lines, so the page's table and its pictures come from the same run.

    .venv/bin/python bench/compare_activemq.py --json /tmp/run.json
    .venv/bin/python bench/pictures.py /tmp/run.json --page docs/benchmarks.md

The SVGs keep their text as text and carry no date or random ids (``svg.hashsalt``), so a
new run's pictures differ from the last only where the figures do.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib

matplotlib.use("Agg")  # no display: files only

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from bench.activemq.figures import (
    AMQ_DEFAULTS,
    AMQ_TUNED,
    AMQ_UNDER_PRIMACY,
    AMQ_UNDER_PRIMACY_WARM,
    FAILOVER,
    FAILOVER_GUARDIAN,
    FAILOVER_JVM,
    FAILOVER_STOCK,
    PRIMACY,
    TPUT_1,
    TPUT_1_TLS,
    TPUT_8,
    TPUT_8_TLS,
    Metric,
    Results,
    Summary,
    evaluate_targets,
    number,
    render_table,
    render_targets,
)
from bench.activemq.run_file import Run

ROOT = Path(__file__).resolve().parents[1]
FAILOVER_SVG = "failover.svg"
THROUGHPUT_SVG = "throughput.svg"
PAGE_START = "<!-- results of bench/pictures.py"
PAGE_END = "<!-- end of the results -->"

PRIMACY_STOCK = f"{PRIMACY}, stock stomp.py"
# One colour per group in every picture (Okabe and Ito's palette, readable when colour-blind).
COLOURS = {
    PRIMACY: "#0072B2",
    PRIMACY_STOCK: "#56B4E9",
    AMQ_TUNED: "#D55E00",
    AMQ_DEFAULTS: "#E69F00",
    AMQ_UNDER_PRIMACY: "#CC79A7",
    AMQ_UNDER_PRIMACY_WARM: "#009E73",
}


@dataclass(frozen=True)
class Row:
    """One group's samples of one figure, as a row of the failover picture."""

    metric: Metric
    group: str  # the group's label in Results
    label: str  # what the picture calls it


# The kinds of kill a run may make, each a panel, and the groups each may have measured.
# Under primacy "the master" is the master's supervisor; the other two exist only there.
FAILOVER_PANELS: tuple[tuple[str, tuple[Row, ...]], ...] = (
    (
        "kill -9 of the master (under primacy: of the master's supervisor)",
        (
            Row(FAILOVER, PRIMACY, PRIMACY),
            Row(FAILOVER_STOCK, PRIMACY, PRIMACY_STOCK),
            Row(FAILOVER, AMQ_TUNED, AMQ_TUNED),
            Row(FAILOVER, AMQ_DEFAULTS, AMQ_DEFAULTS),
            Row(FAILOVER, AMQ_UNDER_PRIMACY, AMQ_UNDER_PRIMACY),
            Row(FAILOVER, AMQ_UNDER_PRIMACY_WARM, AMQ_UNDER_PRIMACY_WARM),
        ),
    ),
    (
        FAILOVER_GUARDIAN.title,
        (
            Row(FAILOVER_GUARDIAN, AMQ_UNDER_PRIMACY, AMQ_UNDER_PRIMACY),
            Row(FAILOVER_GUARDIAN, AMQ_UNDER_PRIMACY_WARM, AMQ_UNDER_PRIMACY_WARM),
        ),
    ),
    (
        FAILOVER_JVM.title,
        (
            Row(FAILOVER_JVM, AMQ_UNDER_PRIMACY, AMQ_UNDER_PRIMACY),
            Row(FAILOVER_JVM, AMQ_UNDER_PRIMACY_WARM, AMQ_UNDER_PRIMACY_WARM),
        ),
    ),
)
THROUGHPUT_GROUPS = (PRIMACY, AMQ_TUNED)
THROUGHPUT_PANELS = (
    ("plain STOMP", (TPUT_1, TPUT_8)),
    ("STOMP over TLS", (TPUT_1_TLS, TPUT_8_TLS)),
)
PRODUCERS = ("1 producer", "8 producers")


def _style() -> None:
    plt.rcParams.update(
        {
            "svg.fonttype": "none",  # text stays text: searchable, and diffable
            "svg.hashsalt": "primacy-benchmarks",  # clip-path ids the same on every run
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )


def _save(figure: Figure, path: Path) -> None:
    figure.savefig(path, format="svg", metadata={"Date": None, "Creator": "bench/pictures.py"})
    plt.close(figure)


def _jitter(count: int) -> list[float]:
    """Vertical offsets that spread a row's points without randomness (a golden-ratio walk),
    so a run's picture is the same every time it is drawn."""
    return [((i * 0.618034) % 1.0 - 0.5) * 0.36 for i in range(count)]


def failover_picture(results: Results, path: Path) -> None:
    """Every failover sample of the run, a panel per kind of kill with samples, a row per group
    (its points, a box around the middle half with lines out to min and max, the median written
    beside it). The legend names every group drawn, in the order of the rows."""
    panels = [
        (title, [row for row in rows if results.samples.get((row.metric.key, row.group))])
        for title, rows in FAILOVER_PANELS
    ]
    panels = [(title, rows) for title, rows in panels if rows]
    if not panels:
        raise ValueError("the run has no failover samples to draw")
    heights = [len(rows) + 1.2 for _, rows in panels]
    figure, axes = plt.subplots(
        len(panels),
        1,
        sharex=True,
        figsize=(8.5, 0.45 * sum(heights) + 1.2),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    drawn: list[str] = []
    for ax, (title, rows) in zip(axes[:, 0], panels, strict=True):
        for y, row in enumerate(reversed(rows)):
            values_ms = [v * 1000 for v in results.samples[(row.metric.key, row.group)]]
            summary = Summary.of(values_ms)
            assert summary is not None
            colour = COLOURS[row.label]
            ax.boxplot(
                [values_ms],
                positions=[y],
                orientation="horizontal",
                whis=(0, 100),
                widths=0.5,
                showfliers=False,
                patch_artist=True,
                boxprops={"facecolor": colour, "alpha": 0.25, "edgecolor": colour},
                medianprops={"color": colour, "linewidth": 2},
                whiskerprops={"color": colour},
                capprops={"color": colour},
            )
            ax.scatter(
                values_ms,
                [y + offset for offset in _jitter(len(values_ms))],
                s=12,
                color=colour,
                zorder=3,
            )
            ax.annotate(
                f"{number(summary.median)} ms (n={summary.n})",
                (summary.maximum, y),
                xytext=(6, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
        drawn += [row.label for row in rows if row.label not in drawn]
        ax.set_yticks(range(len(rows)), [row.label for row in reversed(rows)])
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_title(title, loc="left", fontsize=9)
        ax.set_xscale("log")
        ax.grid(axis="x", which="both", alpha=0.3)
    bottom = axes[-1, 0]
    bottom.set_xlabel("kill -9 → first RECEIPT from the new master (ms, log scale)")
    bottom.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 100, 200, 500, 1 000
    bottom.xaxis.set_major_formatter(FuncFormatter(_ms_tick))
    bottom.xaxis.set_minor_formatter(NullFormatter())
    left, right = bottom.get_xlim()
    bottom.set_xlim(left, right * 1.6)  # room for the medians written right of each row
    figure.legend(
        handles=[Patch(color=COLOURS[label], label=label) for label in drawn],
        loc="upper center",
        ncols=3,
        frameon=False,
        fontsize=8,
    )
    figure.suptitle(
        "Failover: a point per kill; the box holds the middle half, the lines reach min and max, "
        "the thick line and the figure beside it are the median",
        y=0.02,
        va="bottom",
        fontsize=8,
    )
    figure.tight_layout(rect=(0, 0.04, 1, 0.93))
    _save(figure, path)


def _ms_tick(value: float, _position: int) -> str:
    return number(value) if value >= 1 else f"{value:g}"


def throughput_picture(results: Results, path: Path) -> None:
    """Persistent throughput by producer count, primacy beside ActiveMQ tuned: a bar at the
    median, a line from min to max, every round's figure as a point. A panel for plain STOMP
    and, when the run measured it, one over TLS."""
    panels = [
        (title, metrics)
        for title, metrics in THROUGHPUT_PANELS
        if any(results.samples.get((m.key, g)) for m in metrics for g in THROUGHPUT_GROUPS)
    ]
    if not panels:
        raise ValueError("the run has no throughput samples to draw")
    figure, axes = plt.subplots(1, len(panels), sharey=True, figsize=(8.5, 3.6), squeeze=False)
    width = 0.38
    drawn: list[str] = []
    for ax, (title, metrics) in zip(axes[0], panels, strict=True):
        for i, group in enumerate(THROUGHPUT_GROUPS):
            offset = (i - (len(THROUGHPUT_GROUPS) - 1) / 2) * width
            for x, metric in enumerate(metrics):
                summary = results.summary(metric, group)
                if summary is None:
                    continue
                if group not in drawn:
                    drawn.append(group)
                colour = COLOURS[group]
                values = results.samples[(metric.key, group)]
                ax.bar(x + offset, summary.median, width * 0.9, color=colour, alpha=0.35)
                ax.vlines(x + offset, summary.minimum, summary.maximum, color=colour)
                ax.scatter(
                    [x + offset + o * 0.5 for o in _jitter(len(values))],
                    values,
                    s=10,
                    color=colour,
                    zorder=3,
                )
                ax.annotate(
                    number(summary.median),
                    (x + offset, summary.maximum),
                    xytext=(0, 3),
                    textcoords="offset points",
                    ha="center",
                    fontsize=8,
                )
        ax.set_xticks(range(len(metrics)), PRODUCERS)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].set_ylabel("msg/s (1 KiB, a RECEIPT awaited for each)")
    axes[0, 0].set_ylim(0, _throughput_top(results) * 1.15)  # room for the medians on top
    figure.legend(
        handles=[Patch(color=COLOURS[group], label=group) for group in drawn],
        loc="upper center",
        ncols=len(drawn),
        frameon=False,
        fontsize=8,
    )
    figure.suptitle(
        "Persistent throughput: the bar is the median, the line min to max, a point per round",
        y=0.02,
        va="bottom",
        fontsize=8,
    )
    figure.tight_layout(rect=(0, 0.05, 1, 0.92))
    _save(figure, path)


def _throughput_top(results: Results) -> float:
    return max(
        (
            max(results.samples[(metric.key, group)])
            for _, metrics in THROUGHPUT_PANELS
            for metric in metrics
            for group in THROUGHPUT_GROUPS
            if results.samples.get((metric.key, group))
        ),
        default=0.0,
    )


def markdown(run: Run, pictures: Path, page_dir: Path) -> str:
    """The page's results: how the run was made, its pictures, its table and targets."""
    where = Path(os.path.relpath(pictures, page_dir)).as_posix()
    lines = [
        f"{PAGE_START}, from the run of {run.started}; regenerate, do not edit -->",
        f"**Run of {run.started}**, commit `{run.commit}`, python {run.python} on "
        f"{run.cores} cores, load average {run.load_start:.1f} at the start and "
        f"{run.load_end:.1f} at the end:",
        "",
        f"`{run.command}`",
        "",
    ]
    if _has_failovers(run.results):
        lines += [f"![Failover times of every group, every kill]({where}/{FAILOVER_SVG})", ""]
    if _throughput_top(run.results) > 0:
        lines += [f"![Persistent throughput by producer count]({where}/{THROUGHPUT_SVG})", ""]
    lines += [
        render_table(run.results),
        "",
        f"Targets (medians, against {AMQ_TUNED}):",
        "",
        render_targets(evaluate_targets(run.results)),
        PAGE_END,
    ]
    return "\n".join(lines)


def _has_failovers(results: Results) -> bool:
    return any(
        results.samples.get((row.metric.key, row.group))
        for _, rows in FAILOVER_PANELS
        for row in rows
    )


def write_page(page: Path, block: str) -> None:
    """Replace the page's results block (from its start line to its end line) with ``block``."""
    text = page.read_text()
    start, end = text.find(PAGE_START), text.find(PAGE_END)
    if start < 0 or end < start:
        raise SystemExit(f"{page} has no block from '{PAGE_START}' to '{PAGE_END}' to replace")
    page.write_text(text[:start] + block + text[end + len(PAGE_END) :])


def draw(run: Run, out: Path) -> None:
    """Write every picture the run has samples for into ``out``, and remove an earlier run's
    picture of what this one did not measure: ``out`` holds one run's pictures only."""
    _style()
    out.mkdir(parents=True, exist_ok=True)
    for name, measured, picture in (
        (FAILOVER_SVG, _has_failovers(run.results), failover_picture),
        (THROUGHPUT_SVG, _throughput_top(run.results) > 0, throughput_picture),
    ):
        if measured:
            picture(run.results, out / name)
        else:
            (out / name).unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run", type=Path, help="what compare_activemq.py --json wrote")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "docs" / "pictures",
        help="where the SVGs go (default docs/pictures)",
    )
    parser.add_argument(
        "--page",
        type=Path,
        help="also write the results into this page's block (docs/benchmarks.md)",
    )
    args = parser.parse_args(argv)
    run = Run.read(args.run)
    draw(run, args.out)
    block = markdown(run, args.out, (args.page or ROOT / "docs" / "benchmarks.md").parent)
    if args.page is not None:
        write_page(args.page, block)
    print(block)


if __name__ == "__main__":
    main()
