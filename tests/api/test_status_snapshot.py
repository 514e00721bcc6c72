"""/status, /cluster and /metrics over HTTP for a master whose snapshot is built from real
parts: the JSON the operator guide documents, with the typed figures under it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from primacy.api.app import create_app
from primacy.api.metrics import NodeMetrics
from primacy.api.server import ApiServer
from primacy.api.snapshot import StatusSnapshot
from primacy.broker.admission import Budget
from primacy.supervisor.shell.status import broker_figures
from tests.harness.group import free_port

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operator-guide.md"


def documented_status_rows() -> dict[str, str]:
    """The operator guide's /status table: each field of the first column -> its row."""
    text = GUIDE.read_text()
    table = text[text.index("`GET /status` answers 200") :].split("\n\n")[1]
    rows: dict[str, str] = {}
    for row in table.splitlines()[2:]:
        first_column = row.split("|")[1]
        for part in first_column.split(","):
            rows[part.strip().strip("`")] = row
    return rows


@pytest.fixture
def base_url(master_snapshot: StatusSnapshot) -> Iterator[str]:
    port = free_port()
    app = create_app(lambda: master_snapshot, NodeMetrics(lambda: master_snapshot))
    server = ApiServer(app, "127.0.0.1", port, Budget(64, 16))
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_status_sends_exactly_the_documented_fields(
    base_url: str, master_snapshot: StatusSnapshot
) -> None:
    body: dict[str, Any] = httpx.get(base_url + "/status").json()
    rows = documented_status_rows()
    assert set(body) == set(rows)
    # The records' own fields are named in their rows too.
    for record in ("journal", "broker"):
        named = set(re.findall(r"`(\w+)`", rows[record].split("|")[2]))
        assert set(body[record]) <= named, (record, set(body[record]) - named)
    assert set(body["journal"]["settings"]) <= set(re.findall(r"`(\w+)`", GUIDE.read_text()))

    # The figures are the master's own: its journal, its broker, its registry entry.
    journal = master_snapshot.journal
    assert journal is not None
    assert body["journal"]["epoch"] == journal.epoch and body["journal"]["records_written"] >= 1
    assert body["journal"]["settings"]["segment_max_bytes"] == 65536
    assert body["broker"]["running"] is True
    assert (body["broker"]["messages_in"], body["broker"]["messages_out"]) == (3, 1)
    assert body["stomp_auth"] == "none" and body["paused"] is False and body["held_off_s"] == 0


def test_cluster_lists_the_registry_as_status_does(base_url: str) -> None:
    cluster = httpx.get(base_url + "/cluster").json()
    assert cluster["node"] == "node-a"
    (member,) = cluster["members"]
    assert set(member) == {
        "node_id",
        "host",
        "pid",
        "http",
        "priority",
        "role",
        "epoch",
        "updated_unix_s",
        "live",
    }
    assert (member["node_id"], member["role"], member["live"]) == ("node-a", "master", True)
    assert httpx.get(base_url + "/status").json()["cluster"] == cluster["members"]


def test_metrics_is_prometheus_text(base_url: str) -> None:
    response = httpx.get(base_url + "/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    names = {family.name for family in text_string_to_metric_families(response.text)}
    assert {"primacy_role", "primacy_messages_in", "primacy_keepalive_duration_seconds"} <= names


def test_a_broker_figure_either_side_lacks_fails_loudly(master_snapshot: StatusSnapshot) -> None:
    assert master_snapshot.broker is not None
    stats = asdict(master_snapshot.broker)
    assert broker_figures(stats) == master_snapshot.broker
    with pytest.raises(TypeError, match="new_figure"):
        broker_figures({**stats, "new_figure": 1})
    del stats["messages_in"]
    with pytest.raises(TypeError, match="messages_in"):
        broker_figures(stats)
