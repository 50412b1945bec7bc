"""Producers and readers: enqueue jobs, look at them."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response

from app.api.openapi import problems
from app.api.params import JobIdPath, QueuePath
from app.api.types import StorableText, Timestamp
from app.core import tracecontext
from app.core.errors import ValidationFailed
from app.core.fields import MAX_TEXT_LENGTH
from app.core.names import MAX_BIGINT, MAX_NAME_LENGTH, NAME_PATTERN
from app.jobs import views
from app.jobs.explain_schemas import ExplainOut
from app.jobs.routes.deps import services
from app.jobs.schemas import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    MAX_WAIT_SECONDS,
    BatchIn,
    BatchOut,
    DeduplicatedBrief,
    DependenciesOut,
    EnqueuedJob,
    IdempotencyKey,
    JobIn,
    JobOut,
    JobsPage,
    JobState,
    Ref,
)
from app.jobs.service import ItemRef, JobFilter, JobSpec, Trace, Unique
from app.keys import EnqueueCaller, KeyedRoute, ReadCaller

router = APIRouter(route_class=KeyedRoute, prefix="/v1", tags=["jobs"])

TraceparentHeader = Annotated[
    str | None,
    Header(
        description="W3C Trace Context: the producer's span, stored with each job sent "
        "that has no `trace` of its own. Ignored when malformed or repeated."
    ),
]
TracestateHeader = Annotated[
    str | None,
    Header(description="W3C Trace Context, with `traceparent`. Ignored when malformed."),
]


def _header_trace(request: Request, traceparent: str | None) -> Trace | None:
    """The trace context of the request's headers; none when malformed (as W3C Trace
    Context says a receiver does), only its tracestate dropped when that is."""
    if traceparent is None:
        return None
    headers = request.headers
    found = tracecontext.from_headers(headers.getlist("traceparent"), headers.getlist("tracestate"))
    return None if found is None else Trace(*found)


def _spec(job: JobIn, key: str | None = None, trace: Trace | None = None) -> JobSpec:
    """The job sent, as the service takes it, with the `key` of the `Idempotency-Key`
    header if one came, and the `trace` of the request's headers unless it has its own;
    field by field, no second validation: one is built per job enqueued."""
    parents = job.depends_on
    sent = job.trace
    return JobSpec(
        job.type, job.payload, job.priority, job.run_at, job.delay_seconds, job.max_attempts,
        job.lease_seconds, job.idempotency_key if key is None else key, job.metadata,
        None if parents is None
        else [ItemRef(p.ref) if isinstance(p, Ref) else p for p in parents],
        job.on_parent_failure, job.concurrency_key, job.fairness_key,
        None if (u := job.unique) is None else Unique(u.key, u.period, u.states, u.on_conflict),
        job.timeout_seconds, job.start_by,
        trace if sent is None else Trace(sent.traceparent, sent.tracestate),
    )  # fmt: skip


@router.post(
    "/queues/{queue}/jobs",
    operation_id="enqueueJob",
    status_code=201,
    response_model=EnqueuedJob,
    responses={
        200: {
            "model": EnqueuedJob | DeduplicatedBrief,
            "description": "A job already had this key: that job; in brief (its id and "
            "state) when the caller's key lacks the `read` scope.",
        },
        **problems(400, 401, 403, 413, 422, 429),
    },
)
async def enqueue_job(
    caller: EnqueueCaller,
    queue: QueuePath,
    job: JobIn,
    request: Request,
    idempotency_key: Annotated[IdempotencyKey | None, Header()] = None,
    traceparent: TraceparentHeader = None,
    tracestate: TracestateHeader = None,
) -> Response:
    """Enqueue a job."""
    jobs = services(request)
    caller.require_queues([queue])
    allowed = caller.queues.sql() if caller.queues is not None else None
    if idempotency_key is not None and job.idempotency_key not in (None, idempotency_key):
        raise ValidationFailed.field(
            ("idempotency_key",), "differs from the Idempotency-Key header", "value_error"
        )
    spec = _spec(job, idempotency_key, _header_trace(request, traceparent))
    found = await jobs.enqueue.one(queue, spec, allowed)
    if found.deduplicated and not caller.can("read"):
        # Keys are often predictable: replaying one must not show another producer's job.
        return views.deduplicated_brief(found)
    return views.enqueued(found)


@router.post(
    "/queues/{queue}/jobs/batch",
    operation_id="enqueueJobs",
    status_code=201,
    response_model=BatchOut,
    responses=problems(400, 401, 403, 413, 422, 429),
)
async def enqueue_jobs(
    caller: EnqueueCaller,
    queue: QueuePath,
    batch: BatchIn,
    request: Request,
    traceparent: TraceparentHeader = None,
    tracestate: TracestateHeader = None,
) -> dict[str, Any]:
    """Enqueue up to 1000 jobs in one call; answers in request order."""
    jobs = services(request)
    caller.require_queues([queue])
    allowed = caller.queues.sql() if caller.queues is not None else None
    trace = _header_trace(request, traceparent)
    specs = [_spec(job, None, trace) for job in batch.jobs]
    return views.batch(await jobs.enqueue.batch(queue, specs, allowed))


@router.get(
    "/jobs/{job_id}",
    operation_id="getJob",
    response_model=JobOut,
    responses=problems(401, 403, 404, 422),
)
async def get_job(
    caller: ReadCaller,
    job_id: JobIdPath,
    request: Request,
    wait_seconds: Annotated[
        float,
        Query(
            ge=0,
            le=MAX_WAIT_SECONDS,
            description="Wait up to this long for the job to finish (succeeded, failed or "
            "cancelled) before answering; 0: answer at once.",
        ),
    ] = 0,
) -> dict[str, Any]:
    """Get a job with its progress, result, errors and attempts, waiting for it to finish
    if asked (`wait_seconds`)."""
    jobs = services(request)
    job = await jobs.reads.get(job_id)
    caller.require_queue_of(job.queue, "job")
    if wait_seconds > 0:
        job = await jobs.reads.wait(job_id, wait_seconds, abandoned=request.is_disconnected)
    return views.job(job)


@router.get(
    "/jobs/{job_id}/dependencies",
    operation_id="getJobDependencies",
    response_model=DependenciesOut,
    responses=problems(401, 403, 404, 422),
)
async def get_job_dependencies(
    caller: ReadCaller, job_id: JobIdPath, request: Request
) -> dict[str, Any]:
    """The jobs a job waits for (its parents) and the jobs that wait for it (its children),
    of the queues the caller's key may read."""
    jobs = services(request)
    job = await jobs.reads.get(job_id)
    caller.require_queue_of(job.queue, "job")
    allowed = caller.queues.sql() if caller.queues is not None else None
    return views.dependencies(await jobs.reads.dependencies(job_id, allowed))


@router.get(
    "/jobs/{job_id}/explain",
    operation_id="explainJob",
    response_model=ExplainOut,
    responses=problems(401, 403, 404, 422),
)
async def explain_job(caller: ReadCaller, job_id: JobIdPath, request: Request) -> dict[str, Any]:
    """Why a job is not running now: every reason that holds, or how it ended."""
    jobs = services(request)
    allowed = caller.queues.sql() if caller.queues is not None else None
    explained = await jobs.reads.explain(job_id, allowed)
    caller.require_queue_of(explained.facts.queue, "job")
    return views.explanation(explained)


@router.get(
    "/jobs", operation_id="listJobs", response_model=JobsPage, responses=problems(401, 403, 422)
)
async def list_jobs(
    caller: ReadCaller,
    request: Request,
    queue: Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)] = None,
    state: JobState | None = None,
    type: Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = DEFAULT_LIST_LIMIT,
    after: Annotated[int, Query(ge=0, le=MAX_BIGINT, description="Last id seen.")] = 0,
    error_type: Annotated[
        StorableText | None,
        Query(max_length=MAX_TEXT_LENGTH, description="Only jobs whose last error has this type."),
    ] = None,
    created_after: Annotated[
        Timestamp | None, Query(description="Only jobs created at or after this time.")
    ] = None,
    created_before: Annotated[
        Timestamp | None, Query(description="Only jobs created before this time.")
    ] = None,
    key_contains: Annotated[
        StorableText | None,
        Query(min_length=1, max_length=MAX_TEXT_LENGTH, description="Text in the idempotency key."),
    ] = None,
) -> dict[str, Any]:
    """List jobs by id, filtered, a page at a time.

    A key limited to some queues sees only their jobs; naming another queue is 403.
    """
    jobs = services(request)
    if queue is not None:
        caller.require_queues([queue])
    allowed = caller.queues.sql() if caller.queues is not None else None
    where = JobFilter(queue, state, type, error_type, created_after, created_before, key_contains)
    rows = await jobs.reads.page(where, after, limit, allowed)
    return views.page(rows, limit)
