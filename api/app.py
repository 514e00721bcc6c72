"""The FastAPI application: one question per endpoint, answered by the status code.

Handlers only read the latest ``StatusSnapshot`` through the callable they are
given, and act only through ``AdminActions``; they never reach into the
supervisor or take its locks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from fastapi import Body, FastAPI
from fastapi.responses import JSONResponse, Response

from primacy.api.admin import AdminActions, AdminRefused
from primacy.api.guard import RequestGuard
from primacy.api.metrics import NodeMetrics
from primacy.api.snapshot import StatusSnapshot

SnapshotSource = Callable[[], StatusSnapshot]
Handler = Callable[[], Response]
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

    def probe(*paths: str) -> Callable[[Handler], Handler]:
        """GET and HEAD on each path (load balancers use either); HEAD stays out of the schema,
        which otherwise lists one operation id twice."""

        def register(handler: Handler) -> Handler:
            for path in paths:
                app.get(path)(handler)
                app.head(path, include_in_schema=False)(handler)
            return handler

        return register

    @probe("/health")
    def health() -> Response:
        return _answer(True, snapshot(), time.monotonic())

    @probe("/liveness")
    def liveness() -> Response:
        current, now = snapshot(), time.monotonic()
        return _answer(current.is_live(now), current, now)

    @probe("/readiness")
    def readiness() -> Response:
        current = snapshot()
        return _answer(current.is_ready(), current, time.monotonic())

    @probe("/master", "/primary")
    def master() -> Response:
        current, now = snapshot(), time.monotonic()
        return _answer(current.is_serving_master(now), current, now)

    @probe("/slave", "/standby", "/replica")
    def slave() -> Response:
        current, now = snapshot(), time.monotonic()
        return _answer(current.is_healthy_slave() and current.is_live(now), current, now)

    @probe("/status")
    def status() -> Response:
        return JSONResponse(snapshot().to_json())

    @probe("/cluster")
    def cluster() -> Response:
        current = snapshot()
        members = [asdict(member) for member in current.cluster]
        return JSONResponse({"node": current.node, "members": members})

    if metrics is not None:
        registry = metrics

        @app.get("/metrics")
        def render_metrics() -> Response:
            return Response(registry.render(), media_type="text/plain; version=0.0.4")

    if admin is not None and admin_token:
        _add_admin_routes(app, admin)
    # Authorization, body size and body time are judged before any handler reads a byte.
    app.add_middleware(RequestGuard, admin_token=admin_token if admin is not None else None)
    return app


def _add_admin_routes(app: FastAPI, admin: AdminActions) -> None:
    """The admin routes; ``RequestGuard`` has checked the bearer token before they run.

    Absent from the public schema: ``/openapi.json`` answers anyone.
    """

    def act(action: Callable[[], dict[str, Any] | None]) -> Response:
        try:
            result = action() or {}
        except AdminRefused as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        except OSError as exc:  # the share failed, or did not answer in time (TimeoutError)
            # A write that timed out may still land when the share answers: say so.
            error = (
                f"the share did not answer ({exc or type(exc).__name__}); a late answer may "
                "still apply the request: check GET /status before asking again"
            )
            return JSONResponse({"error": error}, status_code=503)
        return JSONResponse({"ok": True, **result})

    @app.post("/switchover", include_in_schema=False)
    def switchover(body: dict[str, Any] | None = Body(default=None)) -> Response:  # noqa: B008
        target = (body or {}).get("to")
        return act(lambda: admin.switchover(str(target) if target else None))

    @app.post("/pause", include_in_schema=False)
    def pause() -> Response:
        def do() -> dict[str, Any]:
            admin.pause()
            return {"paused": True}

        return act(do)

    @app.post("/resume", include_in_schema=False)
    def resume() -> Response:
        def do() -> dict[str, Any]:
            admin.resume()
            return {"paused": False}

        return act(do)

    @app.put("/priority", include_in_schema=False)
    def priority(body: dict[str, Any] = Body(...)) -> Response:  # noqa: B008
        wanted = str(body.get("priority", ""))

        def do() -> dict[str, Any]:
            if wanted not in PRIORITIES:
                raise AdminRefused(f"priority must be one of {', '.join(PRIORITIES)}")
            admin.set_priority(wanted)
            return {"priority": wanted}

        return act(do)
