"""Operators: redrive, pause, resume and purge a queue (the `admin` scope)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from app.api.openapi import OPTIONAL_BODY_TITLE, problems
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
    request: Request,
    redrive: Annotated[RedriveIn | None, Body(title=OPTIONAL_BODY_TITLE)] = None,
) -> dict[str, Any]:
    """Send the queue's failed jobs (filtered, up to `limit`) back to it."""
    queues = services(request)
    redrive = redrive or RedriveIn()
    retried = await queues.admin.redrive(
        queue,
        type_=redrive.type,
        error_type=redrive.error_type,
        failed_since=redrive.failed_since,
        limit=redrive.limit,
        reset_attempts=redrive.reset_attempts,
    )
    return {"retried": retried}


@router.post(
    "/queues/{queue}/pause",
    operation_id="pauseQueue",
    response_model=QueueStateOut,
    responses=problems(422),
)
async def pause_queue(_caller: AdminCaller, queue: QueuePath, request: Request) -> dict[str, Any]:
    """Stop leasing from the queue; enqueueing still works."""
    queues = services(request)
    return views.state(await queues.admin.pause(queue))


@router.post(
    "/queues/{queue}/resume",
    operation_id="resumeQueue",
    response_model=QueueStateOut,
    responses=problems(422),
)
async def resume_queue(_caller: AdminCaller, queue: QueuePath, request: Request) -> dict[str, Any]:
    """Lease from the queue again."""
    queues = services(request)
    return views.state(await queues.admin.resume(queue))


@router.post(
    "/queues/{queue}/purge",
    operation_id="purgeQueue",
    response_model=PurgeOut,
    responses=problems(400, 413, 422),
)
async def purge_queue(
    _caller: AdminCaller, queue: QueuePath, purge: PurgeIn, request: Request
) -> dict[str, Any]:
    """Delete the queue's queued jobs; `confirm` must repeat the queue's name."""
    queues = services(request)
    return {"deleted": await queues.admin.purge(queue, purge.confirm)}
