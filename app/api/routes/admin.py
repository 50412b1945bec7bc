"""Operators: cancel, retry and delete jobs; redrive, pause, resume and purge queues."""

from __future__ import annotations

from typing import Annotated, Any, cast

from fastapi import APIRouter, Body, Depends, Request, Response

from app.api import views
from app.api.auth import ADMIN
from app.api.openapi import problems
from app.api.routes.jobs import JobIdPath, QueuePath
from app.schemas import (
    JobOut,
    PurgeIn,
    PurgeOut,
    QueueStateOut,
    RedriveIn,
    RedriveOut,
    RetryIn,
)
from app.service.admin import AdminService


async def get_admin(request: Request) -> AdminService:
    return cast(AdminService, request.app.state.admin)


AdminDep = Annotated[AdminService, Depends(get_admin)]

# Every action here needs a key with the `admin` scope.
router = APIRouter(
    prefix="/v1", tags=["admin"], dependencies=[Depends(ADMIN)], responses=problems(401, 403)
)


def _queue(row: Any) -> dict[str, Any]:
    return {"queue": row["name"], "paused": row["paused"], "paused_at": row["paused_at"]}


@router.post(
    "/jobs/{job_id}/cancel",
    operation_id="cancelJob",
    response_model=JobOut,
    responses=problems(404, 409, 422),
)
async def cancel_job(job_id: JobIdPath, admin: AdminDep) -> dict[str, Any]:
    """Cancel a job: a queued one at once, a running one when its worker stops."""
    return views.job(await admin.cancel(job_id))


@router.post(
    "/jobs/{job_id}/retry",
    operation_id="retryJob",
    response_model=JobOut,
    responses=problems(400, 404, 409, 413, 422),
)
async def retry_job(
    job_id: JobIdPath, admin: AdminDep, request: Annotated[RetryIn | None, Body()] = None
) -> dict[str, Any]:
    """Send a failed or cancelled job back to the queue."""
    request = request or RetryIn()
    row = await admin.retry(job_id, reset_attempts=request.reset_attempts, run_at=request.run_at)
    return views.job(row)


@router.delete(
    "/jobs/{job_id}",
    operation_id="deleteJob",
    status_code=204,
    response_class=Response,
    responses=problems(404, 409, 422),
)
async def delete_job(job_id: JobIdPath, admin: AdminDep) -> Response:
    """Delete a job that is not running."""
    await admin.delete(job_id)
    return Response(status_code=204)


@router.post(
    "/queues/{queue}/failed/retry",
    operation_id="redriveFailedJobs",
    response_model=RedriveOut,
    responses=problems(400, 413, 422),
)
async def redrive_failed_jobs(
    queue: QueuePath, admin: AdminDep, request: Annotated[RedriveIn | None, Body()] = None
) -> dict[str, Any]:
    """Send the queue's failed jobs (filtered, up to `limit`) back to it."""
    request = request or RedriveIn()
    retried = await admin.redrive(
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
async def pause_queue(queue: QueuePath, admin: AdminDep) -> dict[str, Any]:
    """Stop leasing from the queue; enqueueing still works."""
    return _queue(await admin.pause(queue))


@router.post(
    "/queues/{queue}/resume",
    operation_id="resumeQueue",
    response_model=QueueStateOut,
    responses=problems(422),
)
async def resume_queue(queue: QueuePath, admin: AdminDep) -> dict[str, Any]:
    """Lease from the queue again."""
    return _queue(await admin.resume(queue))


@router.post(
    "/queues/{queue}/purge",
    operation_id="purgeQueue",
    response_model=PurgeOut,
    responses=problems(400, 413, 422),
)
async def purge_queue(queue: QueuePath, request: PurgeIn, admin: AdminDep) -> dict[str, Any]:
    """Delete the queue's queued jobs; `confirm` must repeat the queue's name."""
    return {"deleted": await admin.purge(queue, request.confirm)}
