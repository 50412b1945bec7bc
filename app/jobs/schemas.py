"""The queue core's JSON shapes: jobs to enqueue, leases, heartbeats, acks, and the job
as clients see it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.api.types import ClientKey, JsonNumber, Name, ShortText, Storable, Strict, Timestamp
from app.core import timestamps, tracecontext
from app.core.config import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_MAX_ACK_BATCH,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_ENQUEUE_BATCH,
    DEFAULT_MAX_ERROR_MESSAGE_BYTES,
    DEFAULT_MAX_LEASE_BATCH,
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_LEASE_SECONDS,
    MAX_TIMEOUT_SECONDS,
)
from app.core.fields import MAX_ATTEMPTS_LIMIT, MAX_DELAY_SECONDS, MAX_PRIORITY, MIN_PRIORITY
from app.core.names import MAX_BIGINT
from app.jobs.rows import JobState as JobState  # the API's states are the table's

MAX_QUEUES_PER_LEASE = 100
MAX_WAIT_SECONDS = 30
MAX_LIST_LIMIT = 500
DEFAULT_LIST_LIMIT = 100
MAX_ERROR_MESSAGE_CHARS = 1024 * 1024  # accepted, then truncated to the byte limit

OnParentFailure = Literal["cancel", "run"]
MAX_DEPENDENCIES = 10_000  # parents one job may wait for

IdempotencyKey = Annotated[ShortText, ClientKey]
WorkerId = ShortText
Stage = ShortText
ErrorType = ShortText
Message = Annotated[str, StringConstraints(min_length=1, max_length=4096), Storable]
ErrorMessage = Annotated[str, StringConstraints(max_length=MAX_ERROR_MESSAGE_CHARS), Storable]

Priority = Annotated[int, Field(ge=MIN_PRIORITY, le=MAX_PRIORITY), JsonNumber]
LeaseSeconds = Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS), JsonNumber]
DelaySeconds = Annotated[float, Field(ge=0, le=MAX_DELAY_SECONDS), JsonNumber]
TimeoutSeconds = Annotated[int, Field(ge=1, le=MAX_TIMEOUT_SECONDS), JsonNumber]


# ---- requests ------------------------------------------------------------------------


ConcurrencyKey = ShortText
FairnessKey = ShortText
JobId = Annotated[int, Field(ge=1, le=MAX_BIGINT), JsonNumber]
# What the docs' field tables (tests/docs_tables.py) and the reference say of sizes.
_AT_MOST = f"at most {DEFAULT_MAX_PAYLOAD_BYTES // 1024} KiB serialised (`JOBQ_MAX_PAYLOAD_BYTES`)"


class Ref(Strict):
    """An earlier item of the same batch, by its place in `jobs` (from 0)."""

    ref: Annotated[int, Field(ge=0, le=DEFAULT_MAX_ENQUEUE_BATCH - 1), JsonNumber]


UniqueKey = ShortText
UniquePeriod = Annotated[int, Field(ge=1, le=MAX_DELAY_SECONDS), JsonNumber]
OnConflict = Literal["return_existing", "replace"]
# The states a job passes through before it finishes: a job holds its uniqueness in them
# whatever `states` says, so it never comes back into the unique index (River's rule).
UNIQUE_REQUIRED_STATES: tuple[JobState, ...] = ("waiting", "queued", "running")


class UniqueIn(Strict):
    """One job of this type per queue and key, per period and while in these states."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"key": "digest:user-42", "period": 3600}],
        }
    )

    key: UniqueKey = Field(description="The uniqueness key, with the job's queue and type.")
    period: UniquePeriod | None = Field(
        default=None,
        description="Seconds: one job per key in each period, periods counted from the Unix "
        "epoch (3600: one per clock hour of the enqueue). Default: no period.",
    )
    states: list[JobState] | None = Field(
        default=None,
        min_length=1,
        max_length=len(get_args(JobState)),  # each state once at most
        description="The states in which a job holds the key; they must include `waiting`, "
        "`queued` and `running`. Default: those and `succeeded` (a failed or cancelled job "
        "does not keep another from being made).",
    )
    on_conflict: OnConflict = Field(
        default="return_existing",
        description="When a job holds the key: `return_existing` answers it; `replace` "
        "also gives it this enqueue's `payload` and run time if it is still `queued` "
        "(debounce), else answers it as it is.",
    )

    @model_validator(mode="after")
    def _required_states(self) -> UniqueIn:
        if self.states is not None and not set(UNIQUE_REQUIRED_STATES) <= set(self.states):
            raise ValueError("states must include waiting, queued and running")
        return self


def _traceparent(value: str) -> str:
    if not tracecontext.valid_traceparent(value):
        raise PydanticCustomError("traceparent", f"must be {tracecontext.TRACEPARENT_RULE}")
    return value


def _tracestate(value: str) -> str:
    if not tracecontext.valid_tracestate(value):
        raise PydanticCustomError("tracestate", f"must be {tracecontext.TRACESTATE_RULE}")
    return value


Traceparent = Annotated[
    str,
    StringConstraints(
        pattern=tracecontext.TRACEPARENT_PATTERN, max_length=tracecontext.MAX_TRACEPARENT_LENGTH
    ),
    AfterValidator(_traceparent),
]
Tracestate = Annotated[
    str,
    StringConstraints(max_length=tracecontext.MAX_TRACESTATE_LENGTH),
    AfterValidator(_tracestate),
]


class TraceIn(Strict):
    """A W3C trace context (https://www.w3.org/TR/trace-context/): the producer's span
    the job's work continues."""

    traceparent: Traceparent = Field(
        description="The producer's span, which the worker's span of the job is a child of "
        "(a malformed one is refused)."
    )
    tracestate: Tracestate | None = Field(
        default=None, description="Vendors' `key=value` members, comma-separated."
    )


class JobIn(Strict):
    """A job to enqueue."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "type": "send_email",
                    "payload": {"to": "ada@example.com", "template": "welcome"},
                    "priority": 10,
                    "max_attempts": 5,
                    "idempotency_key": "welcome-ada",
                }
            ]
        }
    )

    type: Name = Field(description="Workers may lease by type.")
    payload: Any = Field(default=None, description=f"Any JSON, {_AT_MOST}.")
    priority: Priority = Field(default=0, description="Higher is leased first.")
    run_at: Timestamp | None = Field(
        default=None,
        description=f"Default: now. Not before this time, with a time zone ({timestamps.RANGE}).",
    )
    delay_seconds: DelaySeconds | None = Field(
        default=None,
        description="Not before now + this many seconds (366 days at most); not together "
        "with `run_at`.",
    )
    max_attempts: Annotated[int, Field(ge=1, le=MAX_ATTEMPTS_LIMIT), JsonNumber] | None = Field(
        default=None,
        description=f"Default: the queue's `max_attempts` setting, else `{DEFAULT_MAX_ATTEMPTS}` "
        "(`JOBQ_DEFAULT_MAX_ATTEMPTS`). Leases in all, counting expired ones.",
    )
    lease_seconds: LeaseSeconds | None = Field(
        default=None,
        description=f"Default: the queue's `lease_seconds` setting, else "
        f"`{DEFAULT_LEASE_SECONDS}` (`JOBQ_DEFAULT_LEASE_SECONDS`). How long each lease lasts "
        "unless the worker asks otherwise.",
    )
    idempotency_key: IdempotencyKey | None = Field(
        default=None,
        description="A job already in the queue with this key is answered instead of a new "
        "one. Also accepted as the `Idempotency-Key` header (if both are given they must "
        "match).",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description=f"Default: `{{}}`. A JSON object, {_AT_MOST}."
    )
    depends_on: list[JobId | Ref] | None = Field(
        default=None,
        max_length=MAX_DEPENDENCIES,
        description='Jobs this one waits for: job ids, or in a batch `{"ref": i}` for the '
        "batch's item i (an earlier one). It is `waiting` until every one has succeeded.",
    )
    on_parent_failure: OnParentFailure = Field(
        default="cancel",
        description="When a parent fails for good or is cancelled: `cancel` this job (and "
        "its own dependents), or `run` it anyway once every parent has finished.",
    )
    concurrency_key: ConcurrencyKey | None = Field(
        default=None,
        description="Jobs with the same key (a customer id, say) run at most the queue's "
        "`max_running_per_key` at once; other keys' jobs flow meanwhile.",
    )
    fairness_key: FairnessKey | None = Field(
        default=None,
        description="Who the job is for (a tenant, say). A `fair` queue's leases take turns "
        "across its keys, each key's best job first; jobs without a key share one turn. "
        "A fifo queue ignores it.",
    )
    unique: UniqueIn | None = Field(
        default=None,
        description="Uniqueness: a job of this type in the queue holding `key` (in the "
        "period, while in the states) is answered, status 200, instead of a new one.",
    )
    timeout_seconds: TimeoutSeconds | None = Field(
        default=None,
        description="Default: the queue's `timeout_seconds` setting, else none. No attempt "
        "runs longer: its lease ends then whatever the heartbeats ask, and the attempt fails "
        "with a `timeout` error (retried as any failure).",
    )
    start_by: Timestamp | None = Field(
        default=None,
        description=f"Default: none. A job not leased by this time never is: it ends "
        f"`cancelled` with a `last_error` of type `expired` ({timestamps.RANGE}).",
    )
    trace: TraceIn | None = Field(
        default=None,
        description="Default: the request's `traceparent` and `tracestate` headers, else "
        "none. The trace context the job was enqueued in, handed to its worker with each "
        "lease (see Tracing).",
    )

    @model_validator(mode="after")
    def _one_start_time(self) -> JobIn:
        if self.run_at is not None and self.delay_seconds is not None:
            raise ValueError("give run_at or delay_seconds, not both")
        return self


class BatchIn(Strict):
    """Several jobs for one queue, enqueued in one round trip."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "jobs": [
                        {"type": "send_email", "payload": {"to": "grace@example.com"}},
                        {"type": "send_email", "payload": {"to": "alan@example.com"}},
                    ]
                }
            ]
        }
    )

    jobs: list[JobIn] = Field(min_length=1, max_length=DEFAULT_MAX_ENQUEUE_BATCH)


class LeaseIn(Strict):
    """What a worker asks for."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"queues": ["emails"], "max_jobs": 10, "wait_seconds": 20, "worker_id": "worker-1"}
            ]
        }
    )

    queues: list[Name] = Field(
        min_length=1, max_length=MAX_QUEUES_PER_LEASE, description="Queue names to lease from."
    )
    types: list[Name] = Field(
        default_factory=list,
        max_length=MAX_QUEUES_PER_LEASE,
        description="Default: `[]`, any type. Type names to accept.",
    )
    max_jobs: Annotated[int, JsonNumber] = Field(
        default=1, ge=1, le=DEFAULT_MAX_LEASE_BATCH, description="Jobs to lease at most."
    )
    lease_seconds: LeaseSeconds | None = Field(
        default=None, description="Default: each job's own `lease_seconds`."
    )
    wait_seconds: Annotated[float, JsonNumber] = Field(
        default=0,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="When no job is due, wait up to this long for one (long poll).",
    )
    worker_id: WorkerId = Field(description="Recorded in the job and its attempts.")


class ProgressIn(Strict):
    """How far the worker got."""

    percent: Annotated[float, Field(ge=0, le=100), JsonNumber] | None = None
    stage: Stage | None = Field(default=None, description="A step's name, e.g. `rendering`.")
    message: Message | None = None


class HeartbeatIn(Strict):
    """Keep a lease alive, optionally reporting progress."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"extend_seconds": 120, "progress": {"percent": 50, "stage": "rendering"}}]
        }
    )

    extend_seconds: LeaseSeconds | None = Field(
        default=None,
        description="Default: the lease's current length. The lease now ends this long from "
        "now, and later heartbeats keep this length.",
    )
    progress: ProgressIn | None = Field(
        default=None,
        description="Default: unchanged. Replaces the stored progress as a whole; each of "
        "its fields is optional.",
    )


class ErrorIn(Strict):
    """Why an attempt failed."""

    type: ErrorType = Field(description="What failed, e.g. an exception class.")
    message: ErrorMessage = Field(
        default="",
        description=f"Stored truncated to {DEFAULT_MAX_ERROR_MESSAGE_BYTES // 1024} KiB of "
        "UTF-8 (`JOBQ_MAX_ERROR_MESSAGE_BYTES`).",
    )
    details: Any = Field(default=None, description=f"Any JSON; the whole `error` is {_AT_MOST}.")


class CompleteIn(Strict):
    """The job's result."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"result": {"message_id": "msg-1"}}]})

    result: Any = None


class FailIn(Strict):
    """An attempt that failed."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"error": {"type": "TimeoutError", "message": "SMTP timed out"}, "retryable": True}
            ]
        }
    )

    error: ErrorIn
    retryable: bool = Field(
        default=True, strict=True, description="`false` fails the job for good."
    )
    retry_after_seconds: DelaySeconds | None = Field(
        default=None,
        description="Run again after exactly this many seconds instead of the backoff.",
    )


class SnoozeIn(Strict):
    """When to run the leased job again, spending no attempt."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"seconds": 60}]})

    seconds: DelaySeconds = Field(
        description="The job is due again this many seconds from now (366 days at most)."
    )


class AckComplete(CompleteIn):
    """Complete one lease, inside a batch."""

    lease_id: str = Field(max_length=100)
    outcome: Literal["complete"]


class AckFail(FailIn):
    """Fail one lease, inside a batch."""

    lease_id: str = Field(max_length=100)
    outcome: Literal["fail"]


Ack = Annotated[AckComplete | AckFail, Field(discriminator="outcome")]


class AcksIn(Strict):
    """Many completions and failures, in one round trip."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "acks": [
                        {
                            "lease_id": "4-07ff06259c5e4b7c9d1e0f2a3b4c5d6e",
                            "outcome": "complete",
                            "result": {"message_id": "msg-3"},
                        },
                        {
                            "lease_id": "3-ce244a58f1e2d3c4b5a69788a7b6c5d4",
                            "outcome": "fail",
                            "error": {"type": "SMTPTimeout", "message": "timed out"},
                        },
                    ]
                }
            ]
        }
    )

    acks: list[Ack] = Field(min_length=1, max_length=DEFAULT_MAX_ACK_BATCH)
    lease: LeaseIn | None = Field(
        default=None,
        description="Default: lease nothing. Then lease as `POST /v1/leases` would, once "
        "the acks are applied: a worker takes its next jobs (the slots of a limited queue "
        "its acks freed among them) in the same call.",
    )


# ---- responses -----------------------------------------------------------------------

JOB_EXAMPLE: dict[str, Any] = {
    "id": 1,
    "queue": "emails",
    "type": "send_email",
    "state": "succeeded",
    "priority": 10,
    "payload": {"to": "ada@example.com"},
    "attempt": 1,
    "max_attempts": 5,
    "lease_seconds": 60,
    "run_at": "2026-11-22T04:08:33.280955Z",
    "created_at": "2026-11-22T04:08:33.280955Z",
    "started_at": "2026-11-22T04:08:33.474273Z",
    "finished_at": "2026-11-22T04:08:35.551039Z",
    "updated_at": "2026-11-22T04:08:35.551039Z",
    "worker_id": None,
    "lease_expires_at": None,
    "cancel_requested": False,
    "progress": {
        "percent": 50,
        "stage": "rendering",
        "message": None,
        "updated_at": "2026-11-22T04:08:34.551039Z",
    },
    "result": {"message_id": "msg-1"},
    "last_error": None,
    "idempotency_key": "welcome-ada",
    "metadata": {},
    "waiting_for": 0,
    "on_parent_failure": "cancel",
    "concurrency_key": None,
    "fairness_key": None,
    "timeout_seconds": None,
    "start_by": None,
    "snoozes": 0,
    "trace": {
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "tracestate": None,
    },
    "attempts": [
        {
            "attempt": 1,
            "worker_id": "worker-1",
            "started_at": "2026-11-22T04:08:33.474273Z",
            "finished_at": "2026-11-22T04:08:35.551039Z",
            "outcome": "succeeded",
            "error": None,
        }
    ],
}


class ProgressOut(BaseModel):
    percent: float | None
    stage: str | None
    message: str | None
    updated_at: datetime | None


class AttemptOut(BaseModel):
    """One finished attempt."""

    attempt: int
    worker_id: str | None
    started_at: datetime | None
    finished_at: datetime
    outcome: Literal["succeeded", "failed", "lease_expired", "timeout", "snoozed"] = Field(
        description="`timeout`: it ran past the job's `timeout_seconds`; `snoozed`: the "
        "worker put the job back for later, spending no attempt (the next lease has the "
        "same `attempt`)."
    )
    error: dict[str, Any] | None


class UniqueOut(BaseModel):
    """The job's uniqueness, as it was enqueued with it."""

    key: str
    period: int | None
    since: datetime | None = Field(description="The start of the job's period.")
    states: list[JobState]


class TraceOut(BaseModel):
    """A job's W3C trace context, as its producer sent it."""

    traceparent: str
    tracestate: str | None


class JobOut(BaseModel):
    """A job and its history."""

    model_config = ConfigDict(json_schema_extra={"examples": [JOB_EXAMPLE]})

    id: int
    queue: str
    type: str
    state: JobState
    priority: int
    payload: Any
    attempt: int
    max_attempts: int
    lease_seconds: int
    run_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    worker_id: str | None = Field(description="The worker holding the job, while it runs.")
    lease_expires_at: datetime | None
    cancel_requested: bool
    progress: ProgressOut | None
    result: Any
    last_error: dict[str, Any] | None
    idempotency_key: str | None
    metadata: dict[str, Any]
    waiting_for: int = Field(
        description="How many of the jobs it depends on have yet to finish as it needs."
    )
    on_parent_failure: OnParentFailure
    concurrency_key: str | None
    fairness_key: str | None
    unique: UniqueOut | None = None
    timeout_seconds: int | None = Field(description="No attempt runs longer (null: no limit).")
    start_by: datetime | None = Field(
        description="Not leased by then, it never is: it ends `cancelled`, `expired`."
    )
    snoozes: int = Field(description="Times a worker snoozed it (none spent an attempt).")
    trace: TraceOut | None = Field(
        description="The W3C trace context it was enqueued in (null: none): a worker's span "
        "of the job is a child of `traceparent`."
    )
    attempts: list[AttemptOut]


class EnqueuedJob(JobOut):
    """The job, and whether it already existed under the same idempotency key or
    uniqueness (`deduplicated`), and whether this enqueue replaced its payload and run
    time (`replaced`, with `unique.on_conflict: replace`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    **JOB_EXAMPLE,
                    "state": "queued",
                    "attempt": 0,
                    "started_at": None,
                    "finished_at": None,
                    "progress": None,
                    "result": None,
                    "attempts": [],
                    "deduplicated": False,
                    "replaced": False,
                }
            ]
        }
    )

    deduplicated: bool
    replaced: bool = False


class BatchItemOut(BaseModel):
    id: int
    state: JobState
    deduplicated: bool
    replaced: bool = False


class DeduplicatedBrief(BatchItemOut):
    """A job already held this idempotency key, and the caller may not read the queue's
    jobs (no `read` scope): only its id and state, as a batch enqueue answers."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"id": 1, "state": "succeeded", "deduplicated": True, "replaced": False}]
        }
    )


class BatchOut(BaseModel):
    """One entry per submitted job, in request order."""

    jobs: list[BatchItemOut]


class JobsPage(BaseModel):
    """A page of jobs; pass `next_after` as `after` for the next page."""

    jobs: list[JobOut]
    next_after: int | None


class ParentOut(BaseModel):
    """A job another depends on, as its dependent's worker sees it."""

    id: int
    type: str
    state: JobState
    result: Any


class DependencyOut(BaseModel):
    """A job at the other end of a dependency."""

    id: int
    queue: str
    type: str
    state: JobState


class DependenciesOut(BaseModel):
    """The jobs a job waits for, and the jobs that wait for it."""

    parents: list[DependencyOut]
    children: list[DependencyOut]


class LeaseOut(BaseModel):
    """A job handed to a worker, and the token that proves it holds the job."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "lease_id": "1-2800d5329c5e4b7c9d1e0f2a3b4c5d6e",
                    "expires_at": "2026-11-22T04:09:33.474273Z",
                    "timeout_at": None,
                    "job": {
                        **JOB_EXAMPLE,
                        "state": "running",
                        "finished_at": None,
                        "worker_id": "worker-1",
                        "lease_expires_at": "2026-11-22T04:09:33.474273Z",
                        "progress": None,
                        "result": None,
                        "attempts": [],
                    },
                    "parents": [],
                }
            ]
        }
    )

    lease_id: str
    expires_at: datetime
    timeout_at: datetime | None = Field(
        description="When this attempt times out (the job's `timeout_seconds` after the "
        "lease began): no heartbeat extends the lease past it, and the service fails the "
        "attempt then. Null: no timeout."
    )
    job: JobOut
    parents: list[ParentOut] = Field(
        description="The jobs this one depended on, with their results (empty if none)."
    )


class LeasesOut(BaseModel):
    leases: list[LeaseOut]


class HeartbeatOut(BaseModel):
    lease_id: str
    expires_at: datetime
    cancel_requested: bool
    progress_recorded: bool = Field(
        description="This heartbeat's progress was stored; false when it sent none, or when the "
        "lease's row was written less than JOBQ_HEARTBEAT_MIN_INTERVAL_SECONDS ago."
    )


class AckResult(BaseModel):
    """What the single call would have answered for this lease."""

    lease_id: str
    status: int
    code: str | None = None
    job_id: int | None = None
    state: JobState | None = None


class AcksOut(BaseModel):
    results: list[AckResult]
    leases: list[LeaseOut] | None = Field(
        default=None, description="The jobs leased, when the call asked for a `lease`."
    )


class RetryIn(Strict):
    """How to send a failed or cancelled job back to the queue."""

    reset_attempts: bool = Field(
        default=False,
        strict=True,
        description="Start counting attempts from 0 again (history is kept).",
    )
    run_at: Timestamp | None = Field(
        default=None,
        description=f"Default: now. Due then, with a time zone ({timestamps.RANGE}).",
    )
