"""Workers: lease jobs, heartbeat, complete or fail them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Body, Path, Request, Response

from app.api.answers import answer
from app.api.openapi import OPTIONAL_BODY_TITLE, problems
from app.jobs import views
from app.jobs.routes.deps import services
from app.jobs.schemas import (
    AckComplete,
    AckFail,
    AcksIn,
    AcksOut,
    CompleteIn,
    ErrorIn,
    FailIn,
    HeartbeatIn,
    HeartbeatOut,
    JobOut,
    LeaseIn,
    LeasesOut,
    SnoozeIn,
)
from app.jobs.service import Ack, AttemptError, Finished, Leased, Progress, Wanted
from app.keys import KeyedRoute, WorkCaller
from app.workers import QUIET_HEADER, HostHeader, SdkHeader, WorkerHeader

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["leases"])

THROTTLED_HEADER = "Jobq-Throttled"
LeasePath = Annotated[str, Path(max_length=100, description="The lease's token.")]


def _attempt_error(error: ErrorIn) -> AttemptError:
    return AttemptError(error.type, error.message, error.details)


def _failed(ack: AckFail) -> Ack:
    error = _attempt_error(ack.error)
    return Ack(ack.lease_id, "fail", None, error, ack.retryable, ack.retry_after_seconds)


def _acks(sent: Sequence[AckComplete | AckFail]) -> list[Ack]:
    """The acks sent, as the service takes them (a batch holds up to 1000, most of them
    completes: built inline; `type(ack) is`, not isinstance, which runs Python code for
    pydantic's models, ABCs)."""
    return [
        Ack(ack.lease_id, "complete", ack.result)
        if type(ack) is AckComplete
        # the discriminated union's other member
        else _failed(ack)  # type: ignore[arg-type]
        for ack in sent
    ]


THROTTLED = {
    "headers": {
        THROTTLED_HEADER: {
            "description": "The limits of a queue that held this lease back "
            "(`max_running`, `max_running_per_key`, `rate_limit`), comma-separated.",
            "schema": {"type": "string"},
        },
        QUIET_HEADER: {
            "description": "`1`: the worker is quiet (`POST /v1/workers/{id}/quiet`), so "
            "it was leased no job; it should lease no more, finishing the jobs it holds.",
            "schema": {"type": "string"},
        },
    }
}


@router.post(
    "/leases",
    operation_id="leaseJobs",
    response_model=LeasesOut,
    responses={200: THROTTLED, **problems(400, 401, 403, 413, 422)},
)
async def lease_jobs(
    caller: WorkCaller,
    lease: LeaseIn,
    request: Request,
    jobq_worker_sdk: SdkHeader = None,
    jobq_worker_host: HostHeader = None,
) -> Response:
    """Lease up to `max_jobs` due jobs, highest priority first; `[]` when none is due.

    With `wait_seconds`, waits for a job to arrive when none is due (long poll). The
    leases belong to the API key that took them: no other key may heartbeat or finish them.
    When a queue's limits held the lease back, the `Jobq-Throttled` header names them
    (`max_running`, `max_running_per_key`, `rate_limit`). A quiet worker is leased
    nothing, and told so (`Jobq-Worker-Quiet: 1`).
    """
    jobs = services(request)
    caller.require_queues(lease.queues)
    presence = jobs.presence
    worker_id = lease.worker_id
    if presence.saw(
        worker_id, sdk=jobq_worker_sdk, host=jobq_worker_host, queues=lease.queues,
        types=lease.types,
    ):  # fmt: skip
        return _quiet(views.leases(()))
    leased = await jobs.leases.lease(
        _wanted(lease),
        abandoned=request.is_disconnected,
        key_id=caller.key_id,
        allowed=caller.queues.sql() if caller.queues is not None else None,
    )
    if leased.leases:
        presence.saw(worker_id, leased=len(leased.leases))
    return _throttled(views.leases(leased.leases), leased)


def _quiet(response: Response) -> Response:
    """`response`, telling its worker it is quiet."""
    response.headers[QUIET_HEADER] = "1"
    return response


def _wanted(lease: LeaseIn) -> Wanted:
    return Wanted(
        lease.queues,
        lease.types,
        lease.max_jobs,
        lease.lease_seconds,
        lease.wait_seconds,
        lease.worker_id,
    )


def _throttled(response: Response, leased: Leased) -> Response:
    """`response`, naming the limits that held the lease back in its header."""
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
    request: Request,
    heartbeat: Annotated[HeartbeatIn | None, Body(title=OPTIONAL_BODY_TITLE)] = None,
    jobq_worker: WorkerHeader = None,
) -> Response:
    """Extend a lease from now and report progress; says whether cancellation was requested."""
    jobs = services(request)
    if jobq_worker is not None:
        jobs.presence.saw(jobq_worker)
    heartbeat = heartbeat or HeartbeatIn()
    sent = heartbeat.progress
    progress = Progress(sent.percent, sent.stage, sent.message) if sent is not None else None
    beat = await jobs.leases.heartbeat(
        lease_id, heartbeat.extend_seconds, progress, key_id=caller.key_id
    )
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
    request: Request,
    completion: Annotated[CompleteIn | None, Body(title=OPTIONAL_BODY_TITLE)] = None,
    jobq_worker: WorkerHeader = None,
) -> Response:
    """Mark the leased job succeeded, with its result."""
    jobs = services(request)
    result = completion.result if completion is not None else None
    job = await jobs.acks.complete(lease_id, result, caller.key_id)
    if jobq_worker is not None:
        jobs.presence.saw(jobq_worker, finished=1)
    return views.job_answer(job)


@router.post(
    "/leases/{lease_id}/fail",
    operation_id="failLease",
    response_model=JobOut,
    responses=problems(400, 401, 403, 404, 409, 413, 422),
)
async def fail_lease(
    caller: WorkCaller,
    lease_id: LeasePath,
    failure: FailIn,
    request: Request,
    jobq_worker: WorkerHeader = None,
) -> Response:
    """Record a failed attempt: retried after a backoff, or `failed` when no try is left."""
    jobs = services(request)
    job = await jobs.acks.fail(
        lease_id,
        _attempt_error(failure.error),
        retryable=failure.retryable,
        retry_after_seconds=failure.retry_after_seconds,
        key_id=caller.key_id,
    )
    if jobq_worker is not None:
        jobs.presence.saw(jobq_worker, finished=1)
    return views.job_answer(job)


@router.post(
    "/leases/{lease_id}/snooze",
    operation_id="snoozeLease",
    response_model=JobOut,
    responses=problems(400, 401, 403, 404, 409, 422),
)
async def snooze_lease(
    caller: WorkCaller,
    lease_id: LeasePath,
    snooze: SnoozeIn,
    request: Request,
    jobq_worker: WorkerHeader = None,
) -> Response:
    """Put the leased job back to the queue for `seconds`, spending no attempt."""
    jobs = services(request)
    if jobq_worker is not None:
        jobs.presence.saw(jobq_worker)
    job = await jobs.snoozes.snooze(lease_id, snooze.seconds, caller.key_id)
    return views.job_answer(job)


@router.post(
    "/acks",
    operation_id="ackLeases",
    response_model=AcksOut,
    responses={200: THROTTLED, **problems(400, 401, 403, 413, 422)},
)
async def ack_leases(
    caller: WorkCaller,
    batch: AcksIn,
    request: Request,
    jobq_worker: WorkerHeader = None,
    jobq_worker_sdk: SdkHeader = None,
    jobq_worker_host: HostHeader = None,
) -> Response:
    """Complete or fail up to 1000 leases in one call; one result per ack, in order.

    With `lease`, then leases as `POST /v1/leases` does (complete-and-lease): the
    call's refusals (4xx) come before any ack is applied; a quiet worker's acks are
    applied, and it is leased nothing (`Jobq-Worker-Quiet: 1`).
    """
    jobs = services(request)
    presence = jobs.presence
    wanted = batch.lease
    if wanted is None:
        finished = await jobs.acks.finish(_acks(batch.acks), caller.key_id)
        if jobq_worker is not None:
            presence.saw(jobq_worker, finished=_applied(finished))
        return views.acks(finished)
    caller.require_queues(wanted.queues)
    worker_id = wanted.worker_id
    if presence.saw(
        worker_id, sdk=jobq_worker_sdk, host=jobq_worker_host, queues=wanted.queues,
        types=wanted.types,
    ):  # fmt: skip
        finished = await jobs.acks.finish(_acks(batch.acks), caller.key_id)
        presence.saw(worker_id, finished=_applied(finished))
        return _quiet(views.acks(finished, ()))
    finished, leased = await jobs.ack_and_lease(
        _acks(batch.acks),
        _wanted(wanted),
        abandoned=request.is_disconnected,
        key_id=caller.key_id,
        allowed=caller.queues.sql() if caller.queues is not None else None,
    )
    presence.saw(worker_id, leased=len(leased.leases), finished=_applied(finished))
    return _throttled(views.acks(finished, leased.leases), leased)


def _applied(finished: Sequence[Finished]) -> int:
    """How many of the acks finished their jobs."""
    return sum(1 for f in finished if f.error is None)
