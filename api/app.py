"""The FastAPI application: one question per endpoint, answered by the status code.

Handlers only read the latest ``StatusSnapshot`` through the callable they are
given; they never reach into the supervisor or take its locks.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from api.snapshot import StatusSnapshot

SnapshotSource = Callable[[], StatusSnapshot]


def _answer(ok: bool, snapshot: StatusSnapshot) -> Response:
    return JSONResponse(
        {"node": snapshot.node, "role": snapshot.role, "epoch": snapshot.epoch},
        status_code=200 if ok else 503,
    )


def create_app(snapshot: SnapshotSource) -> FastAPI:
    """Build the status application over a snapshot source."""
    app = FastAPI(title="primacy node status", docs_url=None, redoc_url=None)

    @app.api_route("/health", methods=["GET", "HEAD"])
    def health() -> Response:
        return _answer(True, snapshot())

    @app.api_route("/master", methods=["GET", "HEAD"])
    @app.api_route("/primary", methods=["GET", "HEAD"])
    def master() -> Response:
        current = snapshot()
        return _answer(current.is_serving_master(), current)

    @app.api_route("/slave", methods=["GET", "HEAD"])
    @app.api_route("/standby", methods=["GET", "HEAD"])
    @app.api_route("/replica", methods=["GET", "HEAD"])
    def slave() -> Response:
        current = snapshot()
        return _answer(current.is_healthy_slave(), current)

    @app.api_route("/status", methods=["GET", "HEAD"])
    def status() -> Response:
        return JSONResponse(snapshot().to_json())

    return app
