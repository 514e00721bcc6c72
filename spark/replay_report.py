"""The replay's report: ``report.json`` with the headline figures, ``report.html`` with charts.

Charts are PNGs drawn with matplotlib (Agg, no display needed) and embedded
as base64, so the HTML is one self-contained file to mail or archive. Inputs
are small, already-aggregated rows collected from Spark.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from primacy.spark.tenure import Gap, Tenure


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report shows, already aggregated."""

    headline: dict[str, Any]
    tenures: list[Tenure]
    gaps: list[Gap]
    throughput: list[tuple[datetime, str, int]]  # minute, destination, SEND records
    queue_histogram: list[tuple[float, int]]  # log10 of ms (bucket start), acked messages
    anomalies_by_kind: dict[str, int]


def iso(unix_ns: int | None) -> str | None:
    if unix_ns is None:
        return None
    return datetime.fromtimestamp(unix_ns / 1e9, UTC).isoformat(timespec="milliseconds")


def failovers(tenures: list[Tenure]) -> list[dict[str, Any]]:
    """Each hand-over from one serving epoch to the next, with how the old one ended."""
    served = [t for t in tenures if t.served]
    return [
        {
            "from_epoch": old.epoch,
            "from_node": old.node,
            "to_epoch": new.epoch,
            "to_node": new.node,
            "how_ended": old.how_ended,
            "at": iso(new.serving_from_unix_ns),
        }
        for old, new in itertools.pairwise(served)
    ]


def write_json(path: Path, inputs: ReportInputs) -> dict[str, Any]:
    gaps = [g for g in inputs.gaps if g.duration_s is not None]
    document = {
        **inputs.headline,
        "failovers": failovers(inputs.tenures),
        "gaps": {
            "count": len(gaps),
            "total_s": round(sum(g.duration_s or 0.0 for g in gaps), 3),
            "longest_s": round(max((g.duration_s or 0.0 for g in gaps), default=0.0), 3),
            "open_since": next(
                (iso(g.from_unix_ns) for g in inputs.gaps if g.to_unix_ns is None), None
            ),
        },
        "anomalies": inputs.anomalies_by_kind,
    }
    path.write_text(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")
    return document


def write_html(path: Path, inputs: ReportInputs, document: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and executors
    charts = [
        ("Throughput per minute per destination", _throughput_chart(inputs.throughput)),
        ("Time in queue (send to ack)", _queue_chart(inputs.queue_histogram)),
        ("Master timeline", _timeline_chart(inputs.tenures, inputs.gaps)),
    ]
    summary = [(key, document[key]) for key in sorted(inputs.headline)]
    summary += [(f"anomalies: {k}", v) for k, v in sorted(inputs.anomalies_by_kind.items())]
    parts = [
        "<!doctype html><meta charset='utf-8'><title>primacy replay</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px}</style>",
        f"<h1>Journal replay of {html.escape(str(document.get('share', '')))}</h1>",
        "<h2>Summary</h2>",
        _table(["figure", "value"], summary),
        "<h2>Failovers</h2>",
        _table(
            ["from", "to", "how the old master ended", "new master serving at"],
            [
                (
                    f"epoch {f['from_epoch']} ({f['from_node']})",
                    f"epoch {f['to_epoch']} ({f['to_node']})",
                    f["how_ended"],
                    f["at"],
                )
                for f in document["failovers"]
            ],
        ),
        "<h2>Tenures</h2>",
        _table(
            ["epoch", "node", "serving from", "ended", "how", "reason", "records"],
            [
                (
                    t.epoch,
                    t.node,
                    iso(t.serving_from_unix_ns),
                    iso(t.ended_unix_ns),
                    t.how_ended,
                    t.end_reason,
                    t.records,
                )
                for t in inputs.tenures
            ],
        ),
        "<h2>Gaps in service</h2>",
        _table(
            ["after epoch", "before epoch", "from", "to", "seconds", "at most seconds"],
            [
                (
                    g.after_epoch,
                    g.before_epoch,
                    iso(g.from_unix_ns),
                    iso(g.to_unix_ns),
                    _round(g.duration_s),
                    _round(g.longest_duration_s),
                )
                for g in inputs.gaps
            ],
        ),
    ]
    for title, png in charts:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(f"<img alt='{html.escape(title)}' src='data:image/png;base64,{png}'>")
    path.write_text("\n".join(parts) + "\n")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape('' if v is None else str(v))}</td>" for v in row)
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>" if rows else "<p>none</p>"


def _png(figure: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


# The unit a span reads best in: up to two minutes seconds, up to two hours minutes, up to
# two days hours, else days (name, seconds in one, spans up to this many seconds).
_TIME_UNITS = (("seconds", 1.0, 120.0), ("minutes", 60.0, 7_200.0), ("hours", 3_600.0, 172_800.0))


@dataclass(frozen=True)
class TimeAxis:
    """A chart's time axis fitted to its data: time since the data's start, in the unit its
    span reads best in, so a journal of twenty seconds and one of a week both fill the axis
    (matplotlib's date axis spread one minute's point over four years, and labelled a two-second
    span in minutes and microseconds)."""

    origin_s: float  # Unix time of the axis's 0
    span_s: float
    unit: str
    unit_s: float

    @classmethod
    def fitting(cls, start_s: float, end_s: float) -> TimeAxis:
        span_s = max(0.0, end_s - start_s)
        for unit, unit_s, up_to_s in _TIME_UNITS:
            if span_s <= up_to_s:
                return cls(start_s, span_s, unit, unit_s)
        return cls(start_s, span_s, "days", 86_400.0)

    def x(self, unix_s: float) -> float:
        return (unix_s - self.origin_s) / self.unit_s

    @property
    def label(self) -> str:
        since = datetime.fromtimestamp(self.origin_s, UTC).strftime("%Y-%m-%d %H:%M:%S")
        return f"{self.unit} since {since} UTC"

    def apply(self, axes: Any, what: str = "") -> None:
        """Limit ``axes`` to the span (a little either side; one unit for a single instant)
        and name the unit."""
        width = self.span_s / self.unit_s
        pad = width * 0.02 if width > 0 else 1.0
        axes.set_xlim(-pad, width + pad)
        axes.set_xlabel(self.label + (f" ({what})" if what else ""))


def _throughput_chart(rows: list[tuple[datetime, str, int]]) -> str:
    return _png(_throughput_figure(rows))


def _throughput_figure(rows: list[tuple[datetime, str, int]]) -> Any:
    """Each destination's sends in each minute, as steps one minute wide (a minute without
    sends is a step at 0), on a time axis that spans the minutes the journal covers."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 3.5))
    axes.set_ylabel("messages sent per minute")
    if not rows:
        return figure
    minutes = sorted({int(minute.timestamp()) // 60 * 60 for minute, _, _ in rows})
    first, last = minutes[0], minutes[-1]
    axis = TimeAxis.fitting(first, last + 60)
    edges = [axis.x(first + 60 * i) for i in range((last - first) // 60 + 2)]
    by_destination: dict[str, list[int]] = {}
    for minute, destination, count in rows:
        counts = by_destination.setdefault(destination, [0] * (len(edges) - 1))
        counts[(int(minute.timestamp()) // 60 * 60 - first) // 60] += count
    for destination, counts in sorted(by_destination.items()):
        axes.stairs(counts, edges, label=destination, linewidth=1.5)
    axes.set_ylim(bottom=0)
    axis.apply(axes)
    axes.legend(fontsize="small", ncol=4)
    return figure


def _queue_chart(histogram: list[tuple[float, int]]) -> str:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 3.0))
    if histogram:
        starts = [10**bucket for bucket, _ in histogram]
        widths = [10 ** (bucket + 0.25) - 10**bucket for bucket, _ in histogram]
        axes.bar(starts, [count for _, count in histogram], width=widths, align="edge")
        axes.set_xscale("log")
    axes.set_xlabel("time in queue (ms, log scale)")
    axes.set_ylabel("acked messages")
    return _png(figure)


def _timeline_chart(tenures: list[Tenure], gaps: list[Gap]) -> str:
    return _png(_timeline_figure(tenures, gaps))


def _timeline_figure(tenures: list[Tenure], gaps: list[Gap]) -> Any:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 0.6 * max(2, len({t.node for t in tenures})) + 1))
    nodes = sorted({t.node or "?" for t in tenures})
    last_seen = max((t.last_seen_unix_ns or 0 for t in tenures), default=0)
    spans = [
        (tenure, tenure.serving_from_unix_ns / 1e9, (tenure.ended_unix_ns or last_seen) / 1e9)
        for tenure in tenures
        if tenure.serving_from_unix_ns is not None
    ]
    closed = [gap for gap in gaps if gap.to_unix_ns is not None]
    instants = [t for _, start, end in spans for t in (start, end)]
    instants += [t / 1e9 for gap in closed for t in (gap.from_unix_ns, gap.to_unix_ns or 0)]
    if not instants:
        return figure
    axis = TimeAxis.fitting(min(instants), max(instants))
    for tenure, start, end in spans:
        row = nodes.index(tenure.node or "?")
        # An edge keeps a tenure of no length (one instant) visible as a line.
        axes.barh(
            row,
            axis.x(end) - axis.x(start),
            left=axis.x(start),
            height=0.5,
            edgecolor="black",
            linewidth=0.5,
        )
        axes.text(axis.x(start), row + 0.3, f"epoch {tenure.epoch}", fontsize="small")
    for gap in closed:
        start, end = axis.x(gap.from_unix_ns / 1e9), axis.x((gap.to_unix_ns or 0) / 1e9)
        axes.axvspan(start, end, color="red", alpha=0.3)
        axes.axvline(end, color="red", linewidth=1)  # the failover
        axes.text(end, -0.45, f"→ epoch {gap.before_epoch}", fontsize="x-small")
    axes.set_yticks(range(len(nodes)), nodes)
    axis.apply(axes, "red: no serving master; line: failover")
    return figure
