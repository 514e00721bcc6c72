"""monitoring/grafana-dashboard.json: every panel's query parses as PromQL and names only
series /metrics exports or alerts.yml records, so renaming a metric without the dashboard
fails here; and the dashboard covers what an operator looks for."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.monitoring.promql import MONITORING, exported_series, problems, recorded_series

DASHBOARD = json.loads((MONITORING / "grafana-dashboard.json").read_text())


def _panels() -> list[dict[str, Any]]:
    return [panel for panel in DASHBOARD["panels"] if panel["type"] != "row"]


def test_every_panel_query_parses_and_names_only_exported_series() -> None:
    known = exported_series() | recorded_series()
    expressions = [target["expr"] for panel in _panels() for target in panel["targets"]]
    assert expressions
    assert [problem for expr in expressions for problem in problems(expr, known)] == []


def test_the_group_variable_lists_jobs_of_an_exported_series() -> None:
    (job,) = [var for var in DASHBOARD["templating"]["list"] if var["name"] == "job"]
    metric = re.fullmatch(r"label_values\((\w+), job\)", job["definition"])
    assert metric is not None and metric[1] in exported_series()


def test_every_query_is_of_the_chosen_group() -> None:
    for panel in _panels():
        for target in panel["targets"]:
            assert 'job="$job"' in target["expr"], panel["title"]


def test_the_dashboard_shows_the_group_the_message_path_the_limits_and_security() -> None:
    rows = [panel["title"] for panel in DASHBOARD["panels"] if panel["type"] == "row"]
    assert rows == [
        "Group: who is master",
        "Group: roles and failovers",
        "Message path",
        "Limits",
        "Security",
    ]
    ids = [panel["id"] for panel in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
