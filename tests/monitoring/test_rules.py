"""monitoring/alerts.yml: promtool accepts the rules and passes their unit tests
(alerts_test.yml), every expression names only series /metrics exports, and every alert
says how bad, where, and which section of docs/runbook.md tells what to do."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.monitoring.promql import (
    MONITORING,
    RULES,
    exported_series,
    problems,
    recorded_series,
    rules,
)

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbook.md"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (bash .ci/setup dev installs Debian's prometheus as root)",
)


def _promtool(*args: str) -> None:
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, *args], cwd=MONITORING, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_accepts_the_rules() -> None:
    _promtool("check", "rules", RULES.name)


@needs_promtool
def test_every_alert_fires_on_its_series_and_not_on_the_others() -> None:
    _promtool("test", "rules", "alerts_test.yml")


def test_every_alert_has_unit_tests() -> None:
    tested = set(re.findall(r"alertname: (\w+)", (MONITORING / "alerts_test.yml").read_text()))
    alerts = {rule["alert"] for rule in rules() if "alert" in rule}
    assert alerts - tested == set()


def test_every_expression_names_only_series_the_nodes_export() -> None:
    known = exported_series() | recorded_series()
    found = [problem for rule in rules() for problem in problems(rule["expr"], known)]
    assert found == []


def test_every_alert_has_a_severity_a_summary_naming_where_and_a_runbook_section() -> None:
    sections = {_github_anchor(heading) for heading in _headings(RUNBOOK.read_text())}
    for rule in rules():
        if "alert" not in rule:
            continue
        name = rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        summary = rule["annotations"]["summary"]
        assert "{{ $labels.instance }}" in summary or "{{ $labels.job }}" in summary, name
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert path == "docs/runbook.md", name
        assert anchor == name.lower() and anchor in sections, name


def _headings(markdown: str) -> list[str]:
    return re.findall(r"^## (.+)$", markdown, re.MULTILINE)


def _github_anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, spaces to dashes, most punctuation out."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_check_catches_a_renamed_metric_and_a_wrong_label_value() -> None:
    known = exported_series()
    assert problems("rate(primacy_messages_in_total[5m])", known) == []
    assert problems("rate(primacy_messages_inbound_total[5m])", known) != []
    assert problems('primacy_limit_refusals_total{limit="flow_control"}', known) == []
    assert problems('primacy_limit_refusals_total{limit="flow"}', known) != []
    assert problems('primacy_serving{role="master"}', known) != []
    assert problems("rate(primacy_messages_in_total[5m]", known) != []
