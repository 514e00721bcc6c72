"""The status endpoints on a real uvicorn server, fed by snapshots we control."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from primacy.api.app import create_app
from primacy.api.server import ApiServer, ApiServerError
from primacy.api.snapshot import ShareCheck, ShareFinding, StatusSnapshot
from primacy.broker.admission import Budget
from tests.harness.group import free_port


class Source:
    def __init__(self) -> None:
        self.current = StatusSnapshot(
            node="n1", role="starting", epoch=None, since_unix_s=time.time(), priority="normal"
        )

    def __call__(self) -> StatusSnapshot:
        return self.current

    def set(self, role: str, claim_for_s: float = 0.0, epoch: int | None = None) -> None:
        self.current = StatusSnapshot(
            node="n1",
            role=role,
            epoch=epoch,
            since_unix_s=time.time(),
            priority="normal",
            master_claim_expires_monotonic=time.monotonic() + claim_for_s,
        )


@pytest.fixture
def served() -> Iterator[tuple[Source, str]]:
    source = Source()
    port = free_port()
    server = ApiServer(create_app(source), "127.0.0.1", port, Budget(64, 16))
    server.start()
    try:
        yield source, f"http://127.0.0.1:{port}"
    finally:
        server.stop()


ENDPOINTS = ["/master", "/primary", "/slave", "/standby", "/replica", "/health", "/status"]


@pytest.mark.parametrize(
    ("role", "claim_for_s", "expected"),
    [
        (
            "master",
            10.0,
            {"/master": 200, "/primary": 200, "/slave": 503, "/standby": 503, "/replica": 503},
        ),
        ("master", -0.001, {"/master": 503, "/primary": 503, "/slave": 503}),  # claim expired
        (
            "slave",
            0.0,
            {"/master": 503, "/primary": 503, "/slave": 200, "/standby": 200, "/replica": 200},
        ),
        ("acquired", 10.0, {"/master": 503, "/slave": 503}),
        ("demoting", 0.0, {"/master": 503, "/slave": 503}),
        ("starting", 0.0, {"/master": 503, "/slave": 503}),
    ],
)
def test_roles_are_answered_by_status_codes(
    served: tuple[Source, str], role: str, claim_for_s: float, expected: dict[str, int]
) -> None:
    source, base = served
    source.set(role, claim_for_s, epoch=4)
    for path, code in expected.items():
        assert httpx.get(base + path).status_code == code, path
        assert httpx.head(base + path).status_code == code, path
    assert httpx.get(base + "/health").status_code == 200


def test_a_master_claim_lapses_without_a_new_snapshot(served: tuple[Source, str]) -> None:
    source, base = served
    source.set("master", claim_for_s=2.0, epoch=2)
    deadline = source.current.master_claim_expires_monotonic
    answer = httpx.get(base + "/master").status_code
    # Judged by when the answer came back, not by how fast this machine is: an answer
    # that came back before the claim lapsed was decided while it held.
    assert answer == 200 or time.monotonic() >= deadline
    time.sleep(max(0.0, deadline - time.monotonic()))
    assert httpx.get(base + "/master").status_code == 503


def test_status_is_json_for_people(served: tuple[Source, str]) -> None:
    source, base = served
    source.set("master", claim_for_s=10, epoch=9)
    body = httpx.get(base + "/status").json()
    assert body["node"] == "n1" and body["role"] == "master" and body["epoch"] == 9
    assert body["serving"] is True and "since_unix_s" in body and "priority" in body
    assert "master_claim_expires_monotonic" not in body


def test_every_endpoint_answers_head(served: tuple[Source, str]) -> None:
    _, base = served
    for path in ENDPOINTS:
        assert httpx.head(base + path).status_code in (200, 503), path


def test_a_busy_port_is_a_clear_error(served: tuple[Source, str]) -> None:
    _, base = served
    port = int(base.rsplit(":", 1)[1])
    with pytest.raises(ApiServerError, match="cannot listen"):
        ApiServer(create_app(Source()), "127.0.0.1", port, Budget(64, 16)).start()


def test_status_says_since_when_in_iso_8601_and_the_share_check(
    served: tuple[Source, str],
) -> None:
    source, base = served
    body = httpx.get(base + "/status").json()
    assert body["share_check"] is None  # a node started without `primacy run`'s check
    since_unix_s = 1_700_000_000.25
    source.current = StatusSnapshot(
        node="n1",
        role="slave",
        epoch=3,
        since_unix_s=since_unix_s,
        priority="normal",
        share_check=ShareCheck(
            verdict="warnings",
            profile="local",
            fs_type="tmpfs",
            mount_point="/srv/primacy",
            summary="PRIMACY-3007 the share /srv/primacy (tmpfs on /srv/primacy): ...",
            findings=(ShareFinding("PRIMACY-3007", "warning", "tmpfs: works with caveats"),),
        ),
    )
    body = httpx.get(base + "/status").json()
    assert body["since"] == "2023-11-14T22:13:20.250+00:00"
    assert datetime.fromisoformat(body["since"]) == datetime.fromtimestamp(since_unix_s, UTC)
    assert body["since_unix_s"] == since_unix_s
    assert body["share_check"] == {
        "verdict": "warnings",
        "profile": "local",
        "fs_type": "tmpfs",
        "mount_point": "/srv/primacy",
        "summary": "PRIMACY-3007 the share /srv/primacy (tmpfs on /srv/primacy): ...",
        "findings": [
            {"code": "PRIMACY-3007", "severity": "warning", "summary": "tmpfs: works with caveats"}
        ],
    }
