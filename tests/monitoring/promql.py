"""What a PromQL expression of monitoring/ may name: the series /metrics exports (from
api/metrics.py's ``FAMILIES``), Prometheus's ``up``, and the recording rules of alerts.yml."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promql_parser
import yaml

from primacy.api.metrics import FAMILIES, FromSnapshot

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"
RULES = MONITORING / "alerts.yml"
# Labels Prometheus adds to every series it scrapes from a target.
TARGET_LABELS = frozenset({"job", "instance"})
# Grafana replaces these before Prometheus sees the query; any valid duration parses alike.
GRAFANA_INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


@dataclass(frozen=True)
class Series:
    """A series name a query may select: the labels it carries, and where a family has a
    fixed set, the values each label takes (``None``: any)."""

    labels: frozenset[str]
    values: dict[str, frozenset[str]] | None = None


def exported_series() -> dict[str, Series]:
    """Every series name /metrics exports, as Prometheus stores it after a scrape."""
    series: dict[str, Series] = {"up": Series(TARGET_LABELS)}
    for family in FAMILIES:
        labels = TARGET_LABELS | set(family.labels)
        values = None
        if isinstance(family, FromSnapshot) and family.labels:
            values = {
                label: frozenset(sample[i] for sample in family.samples)
                for i, label in enumerate(family.labels)
            }
        if family.kind == "counter":
            series[f"{family.name}_total"] = Series(labels, values)
        elif family.kind == "histogram":
            series[f"{family.name}_bucket"] = Series(labels | {"le"})
            series[f"{family.name}_sum"] = Series(labels)
            series[f"{family.name}_count"] = Series(labels)
        else:
            series[family.name] = Series(labels, values)
    return series


def rules() -> list[dict[str, Any]]:
    """Every rule of alerts.yml, recording and alerting, in file order."""
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def recorded_series() -> dict[str, Series]:
    """The recording rules' names; their labels are whatever their expressions keep."""
    return {rule["record"]: Series(frozenset()) for rule in rules() if "record" in rule}


def problems(expr: str, known: dict[str, Series]) -> list[str]:
    """Why ``expr`` would not select what it means: it does not parse, or it names a series
    /metrics does not export, or matches a label that series lacks or a value it never has.
    Empty when the expression is fine."""
    for variable, duration in GRAFANA_INTERVALS.items():
        expr = expr.replace(variable, duration)
    try:
        tree = promql_parser.parse(expr)
    except ValueError as error:
        return [f"{expr!r} does not parse: {error}"]
    found: list[str] = []

    def check(node: Any) -> None:
        if not isinstance(node, promql_parser.VectorSelector):
            return
        if node.name not in known:
            found.append(f"{expr!r} names {node.name!r}, which /metrics does not export")
            return
        series = known[node.name]
        if not series.labels:  # a recording rule: its labels are not declared anywhere
            return
        for matcher in node.matchers.matchers:
            if matcher.name not in series.labels:
                found.append(f"{expr!r}: {node.name} has no label {matcher.name!r}")
            elif (
                matcher.op == promql_parser.MatchOp.Equal
                and series.values is not None
                and matcher.name in series.values
                and matcher.value not in series.values[matcher.name]
            ):
                found.append(
                    f"{expr!r}: {node.name}'s {matcher.name} is never {matcher.value!r}"
                    f" (only {sorted(series.values[matcher.name])})"
                )

    promql_parser.walk(tree, check)
    return found
