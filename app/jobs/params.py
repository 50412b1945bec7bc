"""The parameters of the queue core's named SQL: a NamedTuple per statement, its fields the
statement's `:names` (see `app.db.statement`), in the order of the files (`enqueue.sql`,
`lease.sql`, `finish.sql`, `jobs.sql`). Statements of one shape share it (`ByJobId`).

JSON goes in as its text (`payload`, `result`, `error`): the service encodes it once,
within its limits. `allowed_names`, `allowed_patterns`: the queues the caller's key may
use, by name and by LIKE pattern (None, None: every queue).
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from app.jobs.rows import JobState

# ---- enqueue.sql ---------------------------------------------------------------------


class NewJob(NamedTuple):
    """A job to make (`jobq.insert_jobs`), its fields checked: JSON as text; None where
    it says nothing (the queue's settings or the service's defaults apply)."""

    type: str
    payload: str
    priority: int
    run_at: datetime | None
    delay_seconds: float | None
    max_attempts: int | None
    lease_seconds: int | None
    idempotency_key: str | None
    metadata: str
    concurrency_key: str | None
    runs_on_parent_failure: bool
    fairness_key: str | None
    unique: str | None  # the `unique` options as JSON
    timeout_seconds: int | None
    start_by: datetime | None
    traceparent: str | None
    tracestate: str | None


class Defaults(NamedTuple):
    """What a job gets that says nothing, and whose queue's settings say nothing either."""

    default_max_attempts: int
    default_lease_seconds: int


class EnqueueOneParams(NamedTuple):
    """One job: the queue, then `NewJob`'s fields, then `Defaults`' (in their order)."""

    queue: str
    type: str
    payload: str
    priority: int
    run_at: datetime | None
    delay_seconds: float | None
    max_attempts: int | None  # None: the queue's default, else `default_max_attempts`
    lease_seconds: int | None  # None: the queue's default, else `default_lease_seconds`
    idempotency_key: str | None
    metadata: str
    concurrency_key: str | None
    runs_on_parent_failure: bool
    fairness_key: str | None
    unique: str | None
    timeout_seconds: int | None  # None: the queue's default, else none
    start_by: datetime | None
    traceparent: str | None
    tracestate: str | None
    default_max_attempts: int
    default_lease_seconds: int


class EnqueueManyParams(NamedTuple):
    """A batch as columns, one for each of `NewJob`'s fields in its order (the i-th of
    each list is the i-th job's), then `Defaults`' fields."""

    queue: str
    types: list[str]
    payloads: list[str]
    priorities: list[int]
    run_ats: list[datetime | None]
    delays: list[float | None]
    max_attempts: list[int | None]
    lease_seconds: list[int | None]
    idempotency_keys: list[str | None]
    metadatas: list[str]
    concurrency_keys: list[str | None]
    runs_on_parent_failure: list[bool]
    fairness_keys: list[str | None]
    uniques: list[str | None]
    timeouts: list[int | None]
    start_bys: list[datetime | None]
    traceparents: list[str | None]
    tracestates: list[str | None]
    default_max_attempts: int
    default_lease_seconds: int


class EnqueueWithDependenciesParams(NamedTuple):
    queue: str
    type: str
    payload: str
    priority: int
    run_at: datetime | None
    delay_seconds: float | None
    max_attempts: int | None
    lease_seconds: int | None
    idempotency_key: str | None
    metadata: str
    depends_on: list[int]
    on_parent_failure: str
    concurrency_key: str | None
    timeout_seconds: int | None
    start_by: datetime | None
    allowed_names: list[str] | None
    allowed_patterns: list[str] | None
    fairness_key: str | None
    unique: str | None
    traceparent: str | None
    tracestate: str | None


class EnqueueWorkflowParams(NamedTuple):
    queue: str
    jobs: str  # a JSON array of the batch's jobs
    allowed_names: list[str] | None
    allowed_patterns: list[str] | None


class RecordEnqueueLimitsParams(NamedTuple):
    default_max_attempts: int
    default_lease_seconds: int
    max_lease_seconds: int
    max_payload_bytes: int
    max_json_depth: int
    max_dependency_depth: int
    max_batch_jobs: int
    max_batch_dependencies: int


# ---- lease.sql -----------------------------------------------------------------------


class LeaseParams(NamedTuple):
    """`lease`: from several queues."""

    queues: list[str]
    types: list[str]  # empty: any type
    max_jobs: int
    lease_seconds: int | None  # None: each job's own
    worker_id: str
    key_id: int | None


class LeaseQueueParams(NamedTuple):
    """`lease_queue` and `lease_limited`: from one queue."""

    queue: str
    types: list[str]
    max_jobs: int
    lease_seconds: int | None
    worker_id: str
    key_id: int | None


class ByQueue(NamedTuple):
    queue: str


class ByQueues(NamedTuple):
    queues: list[str]


class RecordLeasedTypesParams(NamedTuple):
    """Pairs as columns: the i-th queue with the i-th type."""

    queues: list[str]
    types: list[str]


# ---- finish.sql ----------------------------------------------------------------------


class HeartbeatParams(NamedTuple):
    job_id: int
    lease_id: UUID
    extend_seconds: int | None  # None: the lease's own length
    has_progress: bool
    percent: float | None
    stage: str | None
    message: str | None
    min_interval: float  # seconds between the beats written, at least
    key_id: int | None


class AckParams(NamedTuple):
    """One ack, as `finish_one` takes it (and `AckColumns` holds many)."""

    job_id: int
    lease_id: UUID
    outcome: str  # `complete` or `fail`
    result: str | None  # a complete's, as JSON text
    error: str | None  # a fail's, as JSON text
    retryable: bool
    retry_after: float | None  # a fail's delay; None: the backoff's


class AckColumns(NamedTuple):
    """Acks as columns: the i-th of each list is the i-th ack's (see `AckParams`)."""

    job_ids: list[int]
    lease_ids: list[UUID]
    outcomes: list[str]
    results: list[str | None]
    errors: list[str | None]
    retryable: list[bool]
    retry_after: list[float | None]


class FinishOneParams(NamedTuple):
    """An ack, the retry policy, the caller's key: put in by position (a test holds the
    fields to `AckParams`' then the policy's)."""

    job_id: int
    lease_id: UUID
    outcome: str
    result: str | None
    error: str | None
    retryable: bool
    retry_after: float | None
    backoff_base: float
    backoff_cap: float
    backoff_jitter: float
    key_id: int | None


class FinishManyParams(NamedTuple):
    """Acks, the retry policy, the caller's key: put in by position (a test holds the
    fields to `AckColumns`' then the policy's)."""

    job_ids: list[int]
    lease_ids: list[UUID]
    outcomes: list[str]
    results: list[str | None]
    errors: list[str | None]
    retryable: list[bool]
    retry_after: list[float | None]
    backoff_base: float
    backoff_cap: float
    backoff_jitter: float
    key_id: int | None


class SnoozeParams(NamedTuple):
    job_id: int
    lease_id: UUID
    seconds: float  # until the job is due again
    max_snoozes: int  # the job's snoozes so far must be fewer
    key_id: int | None


class CompleteOneParams(NamedTuple):
    job_id: int
    lease_id: UUID
    result: str | None
    key_id: int | None


class CompleteManyParams(NamedTuple):
    job_ids: list[int]
    lease_ids: list[UUID]
    results: list[str | None]
    key_id: int | None


# ---- jobs.sql ------------------------------------------------------------------------


class ByJobId(NamedTuple):
    job_id: int


class ReleaseParams(NamedTuple):
    """`release`: a lease given back, its job due again in `delay_seconds`."""

    job_id: int
    lease_id: UUID
    delay_seconds: float


class ByJobIds(NamedTuple):
    job_ids: list[int]


class JobFilter(NamedTuple):
    """Which jobs a page lists: each filter None is no filter."""

    queue: str | None
    state: JobState | None
    type: str | None
    error_type: str | None  # the last error's
    created_after: datetime | None  # at or after
    created_before: datetime | None
    key_contains: str | None  # text in the idempotency key


class ListJobsParams(NamedTuple):
    """A page of jobs: `JobFilter`'s fields (in its order), then the page and the queues."""

    queue: str | None
    state: JobState | None
    type: str | None
    error_type: str | None
    created_after: datetime | None
    created_before: datetime | None
    key_contains: str | None
    after: int  # the last id of the page before
    limit: int
    allowed_names: list[str] | None
    allowed_patterns: list[str] | None


class RetryJobParams(NamedTuple):
    job_id: int
    reset_attempts: bool
    run_at: datetime | None  # None: now


class ParentsOfParams(NamedTuple):
    child_ids: list[int]
    allowed_names: list[str] | None
    allowed_patterns: list[str] | None


class DependenciesOfParams(NamedTuple):
    job_id: int
    allowed_names: list[str] | None
    allowed_patterns: list[str] | None


# ---- explain.sql ---------------------------------------------------------------------


class ExplainJobParams(NamedTuple):
    job_id: int
    allowed_names: list[str] | None
    allowed_patterns: list[str] | None
    max_ahead: int
