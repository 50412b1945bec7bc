"""Operators: a pushed queue's delivery health, and its breaker's manual reset."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.api.openapi import problems
from app.api.params import QueuePath
from app.keys import AdminCaller, KeyedRoute, ReadCaller
from app.push import views
from app.push.schemas import PushHealthOut
from app.push.service import PushHealthService

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["queues"])


def services(request: Request) -> PushHealthService:
    """The push health service of the app's `Services` (`app.services`)."""
    health: PushHealthService = request.app.state.services.push_health
    return health


@router.get(
    "/queues/{queue}/push",
    operation_id="getPushHealth",
    response_model=PushHealthOut,
    responses=problems(401, 403, 404, 422),
)
async def get_push_health(caller: ReadCaller, queue: QueuePath, request: Request) -> dict[str, Any]:
    """A pushed queue's target and its circuit breaker (404: the queue is pulled)."""
    caller.require_queues([queue])
    return views.health(await services(request).get(queue))


@router.post(
    "/queues/{queue}/push/reset",
    operation_id="resumePushDeliveries",
    response_model=PushHealthOut,
    responses=problems(401, 403, 404, 422),
)
async def resume_push_deliveries(
    _caller: AdminCaller, queue: QueuePath, request: Request
) -> dict[str, Any]:
    """Close a pushed queue's circuit breaker: its deliveries resume at once."""
    return views.health(await services(request).reset(queue))
