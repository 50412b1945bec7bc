"""Workers: lease jobs, heartbeat, complete or fail them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Request, Response

from app.api.answers import answer
from app.api.openapi import problems
from app.jobs import views
from app.jobs.routes.deps import services
from app.jobs.schemas import (
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
from app.keys import KeyedRoute, WorkCaller

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["leases"])

THROTTLED_HEADER = "Jobq-Throttled"
LeasePath = Annotated[str, Path(max_length=100, description="The lease's token.")]


@router.post(
    "/leases",
    operation_id="leaseJobs",
    response_model=LeasesOut,
    responses={
        200: {
            "headers": {
                THROTTLED_HEADER: {
                    "description": "The limits of a queue that held this lease back "
                    "(`max_running`, `max_running_per_key`, `rate_limit`), comma-separated.",
                    "schema": {"type": "string"},
                }
            }
        },
        **problems(400, 401, 403, 413, 422),
    },
)
async def lease_jobs(caller: WorkCaller, request: LeaseIn, http: Request) -> Response:
    """Lease up to `max_jobs` due jobs, highest priority first; `[]` when none is due.

    With `wait_seconds`, waits for a job to arrive when none is due (long poll). The
    leases belong to the API key that took them: no other key may heartbeat or finish them.
    When a queue's limits held the lease back, the `Jobq-Throttled` header names them
    (`max_running`, `max_running_per_key`, `rate_limit`).
    """
    jobs = services(http)
    caller.require_queues(request.queues)
    allowed = caller.queues.sql() if caller.queues is not None else None
    leased = await jobs.leases.lease(
        request, abandoned=http.is_disconnected, key_id=caller.key_id, allowed=allowed
    )
    response = views.leases(leased.leases)
    if leased.throttled:
        response.headers[THROTTLED_HEADER] = ", ".join(leased.throttled)
    return response


@router.post(
    "/leases/{lease_id}/heartbeat",
    operation_id="heartbeatLease",
    response_model=HeartbeatOut,
    responses=problems(400, 401, 403, 404, 409, 413, 422),
)
async def heartbeat_lease(
    caller: WorkCaller,
    lease_id: LeasePath,
    http: Request,
    request: Annotated[HeartbeatIn | None, Body()] = None,
) -> Response:
    """Extend a lease from now and report progress; says whether cancellation was requested."""
    jobs = services(http)
    beat = await jobs.leases.heartbeat(lease_id, request or HeartbeatIn(), caller.key_id)
    return answer(views.heartbeat(beat))


@router.post(
    "/leases/{lease_id}/complete",
    operation_id="completeLease",
    response_model=JobOut,
    responses=problems(400, 401, 403, 404, 409, 413, 422),
)
async def complete_lease(
    caller: WorkCaller,
    lease_id: LeasePath,
    http: Request,
    request: Annotated[CompleteIn | None, Body()] = None,
) -> Response:
    """Mark the leased job succeeded, with its result."""
    jobs = services(http)
    job = await jobs.acks.complete(lease_id, request or CompleteIn(), caller.key_id)
    return views.job_answer(job)


@router.post(
    "/leases/{lease_id}/fail",
    operation_id="failLease",
    response_model=JobOut,
    responses=problems(400, 401, 403, 404, 409, 413, 422),
)
async def fail_lease(
    caller: WorkCaller, lease_id: LeasePath, request: FailIn, http: Request
) -> Response:
    """Record a failed attempt: retried after a backoff, or `failed` when no try is left."""
    jobs = services(http)
    return views.job_answer(await jobs.acks.fail(lease_id, request, caller.key_id))


@router.post(
    "/acks",
    operation_id="ackLeases",
    response_model=AcksOut,
    responses=problems(400, 401, 403, 413, 422),
)
async def ack_leases(caller: WorkCaller, request: AcksIn, http: Request) -> Response:
    """Complete or fail up to 1000 leases in one call; one result per ack, in order."""
    jobs = services(http)
    return views.acks(await jobs.acks.finish(request.acks, caller.key_id))
