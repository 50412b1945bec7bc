"""Operators: cancel, retry and delete a job (the `admin` scope)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Response

from app.api.openapi import OPTIONAL_BODY_TITLE, problems
from app.api.params import JobIdPath
from app.jobs import views
from app.jobs.routes.deps import services
from app.jobs.schemas import JobOut, RetryIn
from app.keys import AdminCaller, KeyedRoute

router = APIRouter(
    route_class=KeyedRoute, prefix="/v1", tags=["admin"], responses=problems(401, 403)
)


@router.post(
    "/jobs/{job_id}/cancel",
    operation_id="cancelJob",
    response_model=JobOut,
    responses=problems(404, 409, 422),
)
async def cancel_job(_caller: AdminCaller, job_id: JobIdPath, request: Request) -> dict[str, Any]:
    """Cancel a job: a queued one at once, a running one when its worker stops."""
    jobs = services(request)
    return views.job(await jobs.admin.cancel(job_id))


@router.post(
    "/jobs/{job_id}/retry",
    operation_id="retryJob",
    response_model=JobOut,
    responses=problems(400, 404, 409, 413, 422),
)
async def retry_job(
    _caller: AdminCaller,
    job_id: JobIdPath,
    request: Request,
    retry: Annotated[RetryIn | None, Body(title=OPTIONAL_BODY_TITLE)] = None,
) -> dict[str, Any]:
    """Send a failed or cancelled job back to the queue."""
    jobs = services(request)
    retry = retry or RetryIn()
    job = await jobs.admin.retry(job_id, reset_attempts=retry.reset_attempts, run_at=retry.run_at)
    return views.job(job)


@router.delete(
    "/jobs/{job_id}",
    operation_id="deleteJob",
    status_code=204,
    response_class=Response,
    responses=problems(404, 409, 422),
)
async def delete_job(_caller: AdminCaller, job_id: JobIdPath, request: Request) -> Response:
    """Delete a job that is not running."""
    jobs = services(request)
    await jobs.admin.delete(job_id)
    return Response(status_code=204)
