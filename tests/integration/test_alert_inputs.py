"""Issue 45 item 7: what the new alerts read, as real nodes export it.

PrimacySlowLeaseChecks was fixed at 0.125 s whatever the keepalive (the nfs4 profile's is
2 s): the rule now divides by the node's own period, which /metrics did not export.
PrimacyNoEligibleStandby counts the slaves that could take over. The rules themselves are
tested by promtool (monitoring/alerts_test.yml).
"""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.group import Group, NodeProcess, wait_until
from tests.harness.operator_http import url

pytestmark = pytest.mark.slow


def _gauges(node: NodeProcess) -> dict[str, float]:
    text = httpx.get(url(node, "/metrics"), timeout=5).text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def test_nodes_export_their_keepalive_and_whether_they_could_take_over(group: Group) -> None:
    keepalive = ("--lock-keep-alive-period-ms", "400")
    master = group.start("a", *keepalive)
    wait_until(master.is_master, 30, "a to serve")
    standby = group.start("b", *keepalive)
    bystander = group.start("c", *keepalive, "--priority", "never")
    for slave in (standby, bystander):
        wait_until(lambda s=slave: s.status("/slave") == 200, 30, "the slaves to be healthy")
    wait_until(
        lambda: _gauges(standby).get("primacy_eligible_standby") == 1.0, 10, "b to be eligible"
    )
    exported = [_gauges(node) for node in (master, standby, bystander)]
    assert [e["primacy_lock_keep_alive_period_seconds"] for e in exported] == [0.4] * 3
    assert [e["primacy_eligible_standby"] for e in exported] == [0, 1, 0]
    status = httpx.get(url(standby, "/status"), timeout=5).json()
    assert (status["eligible_standby"], status["lock_keep_alive_period_s"]) == (True, 0.4)
