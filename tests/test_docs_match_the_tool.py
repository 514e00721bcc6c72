"""Issue 45 item 9: the docs say what the tool does.

The operator guide said there was no certificate-expiry alert while alerts.yml had two;
docs/coming-from.md told ActiveMQ users to expect a cold start while the operator guide's
warm standby runs ActiveMQ (tests/integration/test_activemq_warm_standby.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.monitoring.promql import rules

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _section(markdown: str, heading: str) -> str:
    """From ``heading`` (a whole line) to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    start = markdown.index(f"\n{heading}\n")
    after = re.search(rf"\n#{{1,{level}}} ", markdown[start + len(heading) + 2 :])
    end = len(markdown) if after is None else start + len(heading) + 2 + after.start()
    return markdown[start:end]


def test_the_operator_guide_lists_every_alert_the_rules_have() -> None:
    section = _section(
        (DOCS / "operator-guide.md").read_text(), "### Alerts, dashboard and runbook"
    )
    listed = set(re.findall(r"^\| `(Primacy\w+)` \|", section, re.MULTILINE))
    alerts = {rule["alert"] for rule in rules() if "alert" in rule}
    assert listed == alerts
    assert "There is no alert on" not in section


def test_coming_from_activemq_offers_the_warm_standby() -> None:
    section = _section(
        (DOCS / "coming-from.md").read_text(),
        "## ActiveMQ Classic: shared file system master/slave (KahaDB)",
    )
    assert "exec_warm_standby" in section
    assert "(operator-guide.md#a-warm-standby-behind-a-gate)" in section
    assert "Expect a cold start" not in section
