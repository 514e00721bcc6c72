"""The FastAPI application: one question per endpoint, answered by the status code.

Handlers only read the latest ``StatusSnapshot`` through the callable they are
given, and act only through ``AdminActions``; they never reach into the
supervisor or take its locks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi import Body, FastAPI, Header
from fastapi.responses import JSONResponse, Response

from primacy.api.admin import AdminActions, AdminRefused, token_matches
from primacy.api.metrics import NodeMetrics
from primacy.api.snapshot import StatusSnapshot

SnapshotSource = Callable[[], StatusSnapshot]
PRIORITIES = ("never", "normal", "high", "highest")


def _answer(ok: bool, snapshot: StatusSnapshot, decided_at: float) -> Response:
    """The status code answers; the body says who answered and when it decided (the node's
    CLOCK_MONOTONIC, comparable between nodes on one host only: the delivery of an answer can be
    delayed, by a frozen process or the network, long after the decision)."""
    return JSONResponse(
        {
            "node": snapshot.node,
            "role": snapshot.role,
            "epoch": snapshot.epoch,
            "decided_at_monotonic": decided_at,
        },
        status_code=200 if ok else 503,
    )


def create_app(
    snapshot: SnapshotSource,
    metrics: NodeMetrics | None = None,
    admin: AdminActions | None = None,
    admin_token: str | None = None,
) -> FastAPI:
    """Build the status application; admin routes exist only with both ``admin`` and a token."""
    app = FastAPI(title="primacy node status", docs_url=None, redoc_url=None)

    @app.api_route("/health", methods=["GET", "HEAD"])
    def health() -> Response:
        return _answer(True, snapshot(), time.monotonic())

    @app.api_route("/liveness", methods=["GET", "HEAD"])
    def liveness() -> Response:
        current, now = snapshot(), time.monotonic()
        return _answer(current.is_live(now), current, now)

    @app.api_route("/readiness", methods=["GET", "HEAD"])
    def readiness() -> Response:
        current = snapshot()
        return _answer(current.is_ready(), current, time.monotonic())

    @app.api_route("/master", methods=["GET", "HEAD"])
    @app.api_route("/primary", methods=["GET", "HEAD"])
    def master() -> Response:
        current, now = snapshot(), time.monotonic()
        return _answer(current.is_serving_master(now), current, now)

    @app.api_route("/slave", methods=["GET", "HEAD"])
    @app.api_route("/standby", methods=["GET", "HEAD"])
    @app.api_route("/replica", methods=["GET", "HEAD"])
    def slave() -> Response:
        current, now = snapshot(), time.monotonic()
        return _answer(current.is_healthy_slave() and current.is_live(now), current, now)

    @app.api_route("/status", methods=["GET", "HEAD"])
    def status() -> Response:
        return JSONResponse(snapshot().to_json())

    @app.api_route("/cluster", methods=["GET", "HEAD"])
    def cluster() -> Response:
        current = snapshot()
        return JSONResponse({"node": current.node, "members": current.extra.get("cluster", [])})

    if metrics is not None:
        registry = metrics

        @app.get("/metrics")
        def render_metrics() -> Response:
            return Response(registry.render(), media_type="text/plain; version=0.0.4")

    if admin is not None and admin_token:
        _add_admin_routes(app, admin, admin_token)
    return app


def _add_admin_routes(app: FastAPI, admin: AdminActions, token: str) -> None:
    def authorize(authorization: str | None) -> Response | None:
        verdict = token_matches(token, authorization)
        if verdict is None:
            return JSONResponse(
                {"error": "a bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not verdict:
            return JSONResponse({"error": "the token is not valid"}, status_code=403)
        return None

    def act(authorization: str | None, action: Callable[[], dict[str, Any] | None]) -> Response:
        denied = authorize(authorization)
        if denied is not None:
            return denied
        try:
            result = action() or {}
        except AdminRefused as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        return JSONResponse({"ok": True, **result})

    @app.post("/switchover")
    def switchover(
        body: dict[str, Any] | None = Body(default=None),  # noqa: B008
        authorization: str | None = Header(default=None),
    ) -> Response:
        target = (body or {}).get("to")
        return act(authorization, lambda: admin.switchover(str(target) if target else None))

    @app.post("/pause")
    def pause(authorization: str | None = Header(default=None)) -> Response:
        def do() -> dict[str, Any]:
            admin.pause()
            return {"paused": True}

        return act(authorization, do)

    @app.post("/resume")
    def resume(authorization: str | None = Header(default=None)) -> Response:
        def do() -> dict[str, Any]:
            admin.resume()
            return {"paused": False}

        return act(authorization, do)

    @app.put("/priority")
    def priority(
        body: dict[str, Any] = Body(...),  # noqa: B008
        authorization: str | None = Header(default=None),
    ) -> Response:
        wanted = str(body.get("priority", ""))

        def do() -> dict[str, Any]:
            if wanted not in PRIORITIES:
                raise AdminRefused(f"priority must be one of {', '.join(PRIORITIES)}")
            admin.set_priority(wanted)
            return {"priority": wanted}

        return act(authorization, do)
