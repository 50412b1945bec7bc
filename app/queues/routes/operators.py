"""Operators: redrive, pause, resume and purge a queue (the `admin` scope)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from app.api.openapi import problems
from app.api.params import QueuePath
from app.keys import AdminCaller, KeyedRoute
from app.queues import views
from app.queues.routes.deps import services
from app.queues.schemas import PurgeIn, PurgeOut, QueueStateOut, RedriveIn, RedriveOut

router = APIRouter(
    route_class=KeyedRoute, prefix="/v1", tags=["admin"], responses=problems(401, 403)
)


@router.post(
    "/queues/{queue}/failed/retry",
    operation_id="redriveFailedJobs",
    response_model=RedriveOut,
    responses=problems(400, 413, 422),
)
async def redrive_failed_jobs(
    _caller: AdminCaller,
    queue: QueuePath,
    http: Request,
    request: Annotated[RedriveIn | None, Body()] = None,
) -> dict[str, Any]:
    """Send the queue's failed jobs (filtered, up to `limit`) back to it."""
    queues = services(http)
    request = request or RedriveIn()
    retried = await queues.admin.redrive(
        queue,
        type_=request.type,
        error_type=request.error_type,
        failed_since=request.failed_since,
        limit=request.limit,
        reset_attempts=request.reset_attempts,
    )
    return {"retried": retried}


@router.post(
    "/queues/{queue}/pause",
    operation_id="pauseQueue",
    response_model=QueueStateOut,
    responses=problems(422),
)
async def pause_queue(_caller: AdminCaller, queue: QueuePath, http: Request) -> dict[str, Any]:
    """Stop leasing from the queue; enqueueing still works."""
    queues = services(http)
    return views.state(await queues.admin.pause(queue))


@router.post(
    "/queues/{queue}/resume",
    operation_id="resumeQueue",
    response_model=QueueStateOut,
    responses=problems(422),
)
async def resume_queue(_caller: AdminCaller, queue: QueuePath, http: Request) -> dict[str, Any]:
    """Lease from the queue again."""
    queues = services(http)
    return views.state(await queues.admin.resume(queue))


@router.post(
    "/queues/{queue}/purge",
    operation_id="purgeQueue",
    response_model=PurgeOut,
    responses=problems(400, 413, 422),
)
async def purge_queue(
    _caller: AdminCaller, queue: QueuePath, request: PurgeIn, http: Request
) -> dict[str, Any]:
    """Delete the queue's queued jobs; `confirm` must repeat the queue's name."""
    queues = services(http)
    return {"deleted": await queues.admin.purge(queue, request.confirm)}
