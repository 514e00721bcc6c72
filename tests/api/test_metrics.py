"""/metrics: every family of the one table resolves on a real snapshot, shows what /status
shows, parses as Prometheus text, and is the list the operator guide documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from primacy.api.metrics import (
    FAMILIES,
    Family,
    FromCertificates,
    FromSnapshot,
    NodeMetrics,
    Observed,
    figure,
)
from primacy.api.snapshot import StatusSnapshot

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operator-guide.md"
TABLE_START = "<!-- metrics table: generated from api/metrics.py FAMILIES, "
TABLE_END = "<!-- end of the metrics table -->"


def scrape(snapshot: StatusSnapshot) -> dict[str, list[Sample]]:
    """Render /metrics as the node does, with each observed family fed once, and parse it."""
    metrics = NodeMetrics(lambda: snapshot)
    metrics.role_changes.labels("master").inc()
    metrics.lock_attempts.labels("acquired").inc()
    metrics.session_changes.labels("connected").inc()
    metrics.keepalive_seconds.observe(0.003)
    metrics.observe_commit(records=3, _bytes=300, seconds=0.002)
    parsed = text_string_to_metric_families(metrics.render().decode())
    families = {family.name: family for family in parsed}
    for family in FAMILIES:
        exported = families[family.name]
        assert (exported.type, exported.documentation) == (family.kind, family.help)
    return {name: family.samples for name, family in families.items()}


def at(status: dict[str, Any], path: str) -> Any:
    value: Any = status
    for name in path.split("."):
        value = value[name] if value is not None else None
    return value


def test_every_family_shows_what_status_shows_on_a_real_master(
    master_snapshot: StatusSnapshot,
) -> None:
    samples = scrape(master_snapshot)
    status = master_snapshot.to_json()
    for family in FAMILIES:
        if not isinstance(family, FromSnapshot):
            continue
        exported = [s for s in samples[family.name] if not s.name.endswith("_created")]
        assert {tuple(s.labels[label] for label in family.labels) for s in exported} == set(
            family.samples
        ), family.name
        for sample in exported:
            reading = family.samples[tuple(sample.labels[label] for label in family.labels)]
            shown = at(status, reading.status_field)
            if isinstance(shown, str):  # a state as one gauge per value: 1 for the current one
                expected = 1.0 if shown in sample.labels.values() else 0.0
            else:
                expected = float(shown or 0)
            assert sample.value == expected, (family.name, sample.labels)
    # The broker and journal figures are the real ones, not zeros standing in.
    # Distinct figures, so a family reading a neighbour's field shows here.
    assert [s.value for s in samples["primacy_messages_in"] if s.name.endswith("_total")] == [3.0]
    assert [s.value for s in samples["primacy_messages_out"] if s.name.endswith("_total")] == [1.0]
    assert [s.value for s in samples["primacy_destinations"]] == [2.0]
    assert [s.value for s in samples["primacy_messages_unacknowledged"]] == [2.0]


def test_the_observed_families_count_what_the_node_feeds(master_snapshot: StatusSnapshot) -> None:
    samples = scrape(master_snapshot)
    for family in FAMILIES:
        if isinstance(family, Observed):
            counts = [s for s in samples[family.name] if s.name.endswith(("_total", "_count"))]
            assert [s.value for s in counts] == [1.0], family.name
    (changes,) = [s for s in samples["primacy_role_changes"] if s.name.endswith("_total")]
    assert changes.labels == {"to": "master"}


def test_a_node_without_journal_or_broker_exports_zeros() -> None:
    slave = StatusSnapshot(node="n1", role="slave", epoch=None, since_unix_s=0, priority="normal")
    samples = scrape(slave)
    for family in FAMILIES:
        if isinstance(family, FromSnapshot) and family.name != "primacy_role":
            assert {s.value for s in samples[family.name]} == {0.0}, family.name
    role = {s.labels["role"]: s.value for s in samples["primacy_role"]}
    assert role["slave"] == 1.0 and sum(role.values()) == 1.0


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("broker.mesages_in", AttributeError),  # a typo
        ("journal.settings.segment_max_byte", AttributeError),
        ("extra.paused", AttributeError),
        ("journal.current_segment", TypeError),  # a field, but not a number
        ("journal.settings", TypeError),
        ("cluster", TypeError),
    ],
)
def test_a_reading_of_a_wrong_field_fails_when_declared(path: str, error: type[Exception]) -> None:
    with pytest.raises(error, match=path.replace(".", r"\.")):
        figure(path)


def metrics_table() -> str:
    """The operator guide's metrics table, as FAMILIES declares it."""
    lines = ["| metric | type | help | where the value comes from |", "| --- | --- | --- | --- |"]
    for family in FAMILIES:
        name = family.name + ("_total" if family.kind == "counter" else "")
        labels = "{" + ",".join(family.labels) + "}" if family.labels else ""
        lines.append(f"| `{name}{labels}` | {family.kind} | {family.help} | {_source(family)} |")
    return "\n".join(lines)


def _source(family: Family) -> str:
    if isinstance(family, Observed):
        return "observed by the node as it happens"
    if isinstance(family, FromCertificates):
        return "read at each scrape from `stomp_tls_cert` and `http_tls_cert` (none without TLS)"
    fields = {reading.status_field for reading in family.samples.values()}
    if not family.labels:
        return f"`/status` `{fields.pop()}`"
    if len(fields) == 1:
        values = ", ".join(f"`{value}`" for (value,) in family.samples)
        return f"`/status` `{fields.pop()}`: 1 for the sample of its value, of {values}"
    pairs = ", ".join(f"`{r.status_field}` for `{v}`" for (v,), r in family.samples.items())
    return f"`/status` {pairs}"


def test_the_operator_guide_lists_every_family_as_declared() -> None:
    text = GUIDE.read_text()
    start = text.index(TABLE_START)
    table = text[text.index("\n", start) + 1 : text.index(TABLE_END)].strip()
    assert table == metrics_table(), "paste this into docs/operator-guide.md:\n" + metrics_table()
