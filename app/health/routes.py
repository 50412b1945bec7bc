"""Liveness, readiness and metrics: the service as a whole."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.api.openapi import problems
from app.api.schemas import Health
from app.core import metrics
from app.core.errors import ReaperStalled
from app.keys import Anyone, KeyedRoute, LocalOrAnyKey
from app.queues import metric_families
from app.services import services

router = APIRouter(route_class=KeyedRoute, tags=["health"])
# listed last in the OpenAPI document
metrics_router = APIRouter(route_class=KeyedRoute, tags=["health"])


@router.get("/healthz", operation_id="checkHealth", response_model=Health)
async def healthz(_access: Anyone) -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    operation_id="checkReadiness",
    response_model=Health,
    responses=problems(401, 503),
)
async def readyz(_access: LocalOrAnyKey, request: Request) -> dict[str, str]:
    """The database answers and the reaper is keeping up: send traffic here.

    Open to peers on loopback; others need an API key (any scope).
    """
    built = services(request)
    await built.db.ping()
    reaper = built.background_reaper  # when this process runs the reaper's loop
    if reaper is not None and not reaper.on_time:
        raise ReaperStalled("no reaper pass finished in the last 3 intervals")
    return {"status": "ok"}


@metrics_router.get(
    "/metrics",
    operation_id="getMetrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **problems(401)},
)
async def get_metrics(_access: LocalOrAnyKey, request: Request) -> Response:
    """Prometheus metrics (text exposition format); SQL gauges refresh every few seconds.

    Open to peers on loopback; others need an API key (any scope).
    """
    built = services(request)
    snapshot = await built.queues.stats.snapshot()
    metrics.sample_pool(built.engine)
    return Response(metrics.render(metric_families(snapshot)), media_type=metrics.CONTENT_TYPE)
