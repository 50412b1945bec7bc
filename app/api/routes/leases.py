"""Workers: lease jobs, heartbeat, complete or fail them."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Request, Response

from app.api import views
from app.api.deps import JobsDep, WorkCaller
from app.api.openapi import problems
from app.core.errors import JobqError
from app.schemas import (
    AcksIn,
    AcksOut,
    CompleteIn,
    FailIn,
    HeartbeatIn,
    HeartbeatOut,
    JobOut,
    LeaseIn,
    LeasesOut,
)
from app.service.jobs import Finished

router = APIRouter(prefix="/v1", tags=["leases"])

LeasePath = Annotated[str, Path(max_length=100, description="The lease's token.")]


@router.post(
    "/leases",
    operation_id="leaseJobs",
    response_model=LeasesOut,
    responses=problems(400, 401, 403, 413, 422),
)
async def lease_jobs(
    caller: WorkCaller, request: LeaseIn, jobs: JobsDep, http: Request
) -> Response:
    """Lease up to `max_jobs` due jobs, highest priority first; `[]` when none is due.

    With `wait_seconds`, waits for a job to arrive when none is due (long poll). The
    leases belong to the API key that took them: no other key may heartbeat or finish them.
    """
    caller.require_queues(request.queues)
    return views.leases(
        await jobs.lease(request, abandoned=http.is_disconnected, key_id=caller.key_id)
    )


@router.post(
    "/leases/{lease_id}/heartbeat",
    operation_id="heartbeatLease",
    response_model=HeartbeatOut,
    responses=problems(400, 401, 403, 404, 409, 413, 422),
)
async def heartbeat_lease(
    caller: WorkCaller,
    lease_id: LeasePath,
    jobs: JobsDep,
    request: Annotated[HeartbeatIn | None, Body()] = None,
) -> dict[str, Any]:
    """Extend a lease from now and report progress; says whether cancellation was requested."""
    beat = await jobs.heartbeat(lease_id, request or HeartbeatIn(), caller.key_id)
    return {
        "lease_id": beat.token,
        "expires_at": beat.expires_at,
        "cancel_requested": beat.cancel_requested,
        "progress_recorded": beat.progress_recorded,
    }


@router.post(
    "/leases/{lease_id}/complete",
    operation_id="completeLease",
    response_model=JobOut,
    responses=problems(400, 401, 403, 404, 409, 413, 422),
)
async def complete_lease(
    caller: WorkCaller,
    lease_id: LeasePath,
    jobs: JobsDep,
    request: Annotated[CompleteIn | None, Body()] = None,
) -> Response:
    """Mark the leased job succeeded, with its result."""
    return views.job_answer(await jobs.complete(lease_id, request or CompleteIn(), caller.key_id))


@router.post(
    "/leases/{lease_id}/fail",
    operation_id="failLease",
    response_model=JobOut,
    responses=problems(400, 401, 403, 404, 409, 413, 422),
)
async def fail_lease(
    caller: WorkCaller, lease_id: LeasePath, request: FailIn, jobs: JobsDep
) -> Response:
    """Record a failed attempt: retried after a backoff, or `failed` when no try is left."""
    return views.job_answer(await jobs.fail(lease_id, request, caller.key_id))


def _ack_result(finished: Finished) -> dict[str, Any]:
    error: JobqError | None = finished.error
    # A lease never issued or taken with another key, or an ack refused for its own
    # content (413, 422), says nothing about any job.
    job = finished.job if error is None or error.status not in (403, 404, 413, 422) else None
    return {
        "lease_id": finished.token,
        "status": error.status if error else 200,
        "code": error.code if error else None,
        "job_id": job["id"] if job is not None else None,
        "state": job["state"] if job is not None else None,
    }


@router.post(
    "/acks",
    operation_id="ackLeases",
    response_model=AcksOut,
    responses=problems(400, 401, 403, 413, 422),
)
async def ack_leases(caller: WorkCaller, request: AcksIn, jobs: JobsDep) -> Response:
    """Complete or fail up to 1000 leases in one call; one result per ack, in order."""
    finished = await jobs.finish(request.acks, caller.key_id)
    return views.answer({"results": [_ack_result(f) for f in finished]})
