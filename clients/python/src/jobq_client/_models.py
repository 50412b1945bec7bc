"""What the service answers, as frozen dataclasses; and what a batch enqueue sends.

Parsing is lenient about additions: fields the service adds later are ignored, so an
older client keeps working against a newer service.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

JobState = Literal["waiting", "queued", "running", "succeeded", "failed", "cancelled"]
OnParentFailure = Literal["cancel", "run"]
AttemptOutcome = Literal["succeeded", "failed", "lease_expired", "timeout", "snoozed"]
ReasonCode = Literal[
    "scheduled", "waiting_for_parents", "paused", "max_running", "max_running_per_key",
    "rate_limit", "rate_limit_per_key", "behind", "no_worker", "no_worker_for_type",
    "start_by", "start_by_passed", "pushed", "push_breaker_open",
    "running", "succeeded", "failed", "cancelled",
]  # fmt: skip
FINISHED: tuple[JobState, ...] = ("succeeded", "failed", "cancelled")


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _required_time(value: Any) -> datetime:
    parsed = _time(value)
    if parsed is None:
        raise ValueError(f"expected an RFC 3339 timestamp, got {value!r}")
    return parsed


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a job's worker got, from its latest heartbeat that carried progress."""

    percent: float | None
    stage: str | None
    message: str | None
    updated_at: datetime | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Progress:
        return cls(
            percent=data.get("percent"),
            stage=data.get("stage"),
            message=data.get("message"),
            updated_at=_time(data.get("updated_at")),
        )


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """An error a worker reported (or jobq recorded: `lease_expired`, `parent_failed`)."""

    type: str
    message: str = ""
    details: Any = None

    @classmethod
    def from_json(cls, data: Any) -> ErrorInfo | None:
        if not isinstance(data, dict):
            return None
        return cls(str(data.get("type", "")), data.get("message") or "", data.get("details"))


@dataclass(frozen=True, slots=True)
class Attempt:
    """One finished attempt: `outcome` is succeeded, failed, lease_expired, timeout (it ran
    past the job's `timeout_seconds`) or snoozed (put back for later, no attempt spent)."""

    attempt: int
    worker_id: str | None
    started_at: datetime | None
    finished_at: datetime
    outcome: AttemptOutcome
    error: ErrorInfo | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attempt:
        return cls(
            attempt=data["attempt"],
            worker_id=data.get("worker_id"),
            started_at=_time(data.get("started_at")),
            finished_at=_required_time(data["finished_at"]),
            outcome=data["outcome"],
            error=ErrorInfo.from_json(data.get("error")),
        )


@dataclass(frozen=True, slots=True)
class Uniqueness:
    """A job's uniqueness as it was enqueued (`JobRecord.unique`): its key, period (in
    seconds) and the start of its period, and the states it holds the key in."""

    key: str
    period: int | None
    since: datetime | None
    states: list[JobState]

    @classmethod
    def from_json(cls, data: Any) -> Uniqueness | None:
        if not isinstance(data, dict):
            return None
        return cls(data["key"], data.get("period"), _time(data.get("since")), data["states"])


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A W3C trace context (https://www.w3.org/TR/trace-context/): the span a job's work
    continues. The SDK sends the current OpenTelemetry context's on its own when
    `opentelemetry-api` is installed (`jobq-client[otel]`); give one to `enqueue` to
    name another."""

    traceparent: str
    tracestate: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> TraceContext | None:
        if not isinstance(data, dict):
            return None
        return cls(data["traceparent"], data.get("tracestate"))

    def to_json(self) -> dict[str, str]:
        body = {"traceparent": self.traceparent}
        if self.tracestate is not None:
            body["tracestate"] = self.tracestate
        return body


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job as the service shows it (`GET /v1/jobs/{id}`)."""

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
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    worker_id: str | None = None
    lease_expires_at: datetime | None = None
    cancel_requested: bool = False
    progress: Progress | None = None
    result: Any = None
    last_error: ErrorInfo | None = None
    idempotency_key: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    waiting_for: int = 0
    on_parent_failure: OnParentFailure = "cancel"
    concurrency_key: str | None = None
    fairness_key: str | None = None
    unique: Uniqueness | None = None
    timeout_seconds: int | None = None
    start_by: datetime | None = None
    snoozes: int = 0
    trace: TraceContext | None = None
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Succeeded, failed for good, or cancelled: it will not change by itself."""
        return self.state in FINISHED

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRecord:
        progress = data.get("progress")
        return cls(
            id=data["id"],
            queue=data["queue"],
            type=data["type"],
            state=data["state"],
            priority=data["priority"],
            payload=data.get("payload"),
            attempt=data["attempt"],
            max_attempts=data["max_attempts"],
            lease_seconds=data["lease_seconds"],
            run_at=_required_time(data["run_at"]),
            created_at=_required_time(data["created_at"]),
            updated_at=_required_time(data["updated_at"]),
            started_at=_time(data.get("started_at")),
            finished_at=_time(data.get("finished_at")),
            worker_id=data.get("worker_id"),
            lease_expires_at=_time(data.get("lease_expires_at")),
            cancel_requested=bool(data.get("cancel_requested", False)),
            progress=Progress.from_json(progress) if isinstance(progress, dict) else None,
            result=data.get("result"),
            last_error=ErrorInfo.from_json(data.get("last_error")),
            idempotency_key=data.get("idempotency_key"),
            metadata=data.get("metadata") or {},
            waiting_for=int(data.get("waiting_for") or 0),
            on_parent_failure=data.get("on_parent_failure") or "cancel",
            concurrency_key=data.get("concurrency_key"),
            fairness_key=data.get("fairness_key"),
            unique=Uniqueness.from_json(data.get("unique")),
            timeout_seconds=data.get("timeout_seconds"),
            start_by=_time(data.get("start_by")),
            snoozes=int(data.get("snoozes") or 0),
            trace=TraceContext.from_json(data.get("trace")),
            attempts=[Attempt.from_json(a) for a in data.get("attempts") or []],
        )


@dataclass(frozen=True, slots=True)
class Enqueued:
    """An enqueued job; `deduplicated` when a job already had its idempotency key or its
    uniqueness (`Unique`), `replaced` when this enqueue replaced that job's payload and
    run time (`Unique(on_conflict="replace")`).

    `job` is the whole job, except when a job already had the key and this client's API
    key lacks the `read` scope: jobq then answers only its `id` and `state`, and `job`
    is None (someone else's job is not shown to a key that may not read it).
    """

    id: int
    state: JobState
    deduplicated: bool
    job: JobRecord | None
    replaced: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Enqueued:
        job = JobRecord.from_json(data) if "payload" in data else None
        return cls(
            id=data["id"],
            state=data["state"],
            deduplicated=bool(data["deduplicated"]),
            job=job,
            replaced=bool(data.get("replaced", False)),
        )


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One job of a batch enqueue, in request order."""

    id: int
    state: JobState
    deduplicated: bool
    replaced: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchItem:
        return cls(
            id=data["id"],
            state=data["state"],
            deduplicated=bool(data["deduplicated"]),
            replaced=bool(data.get("replaced", False)),
        )


@dataclass(frozen=True, slots=True)
class JobsPage:
    """A page of jobs; pass `next_after` as `after` for the next one (None: last page)."""

    jobs: list[JobRecord]
    next_after: int | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobsPage:
        return cls(
            jobs=[JobRecord.from_json(j) for j in data["jobs"]], next_after=data.get("next_after")
        )


@dataclass(frozen=True, slots=True)
class Parent:
    """A job a leased job depended on, with its result."""

    id: int
    type: str
    state: JobState
    result: Any

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Parent:
        return cls(data["id"], data["type"], data["state"], data.get("result"))


@dataclass(frozen=True, slots=True)
class Lease:
    """A job handed to this worker, the token that proves it holds the job, and the jobs
    it depended on (with their results)."""

    lease_id: str
    expires_at: datetime
    job: JobRecord
    parents: list[Parent] = field(default_factory=list)
    timeout_at: datetime | None = None  # when this attempt times out (None: no timeout)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Lease:
        return cls(
            lease_id=data["lease_id"],
            expires_at=_required_time(data["expires_at"]),
            job=JobRecord.from_json(data["job"]),
            parents=[Parent.from_json(p) for p in data.get("parents") or []],
            timeout_at=_time(data.get("timeout_at")),
        )


@dataclass(frozen=True, slots=True)
class Related:
    """A job at the other end of a dependency."""

    id: int
    queue: str
    type: str
    state: JobState

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Related:
        return cls(data["id"], data["queue"], data["type"], data["state"])


@dataclass(frozen=True, slots=True)
class Dependencies:
    """The jobs a job waits for (`parents`) and those waiting for it (`children`)."""

    parents: list[Related]
    children: list[Related]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Dependencies:
        return cls(
            [Related.from_json(p) for p in data.get("parents") or []],
            [Related.from_json(c) for c in data.get("children") or []],
        )


@dataclass(frozen=True, slots=True)
class Reason:
    """One thing that holds a job back now (`code`: `scheduled`, `waiting_for_parents`,
    `paused`, `max_running`, `max_running_per_key`, `rate_limit`, `rate_limit_per_key`,
    `behind`, `no_worker`, `no_worker_for_type`, `start_by`, `start_by_passed`,
    `pushed`, `push_breaker_open`), or how it ended (`running`,
    `succeeded`, `failed`, `cancelled`)."""

    code: ReasonCode
    blocking: bool
    message: str
    until: datetime | None = None
    since: datetime | None = None
    count: int | None = None
    limit: int | None = None
    more: bool = False
    parents: list[Related] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Reason:
        return cls(
            data["code"], data["blocking"], data["message"], _time(data.get("until")),
            _time(data.get("since")), data.get("count"), data.get("limit"),
            bool(data.get("more")), [Related.from_json(p) for p in data.get("parents") or []],
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a job is not running now: every reason that holds (`leasable`: none blocks,
    the next lease of its queue takes it).

    ```python
    for reason in client.explain_job(job_id).reasons:
        print(reason.code, reason.message)
    ```
    """

    job_id: int
    queue: str
    type: str
    state: JobState
    at: datetime
    leasable: bool
    reasons: list[Reason]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Explanation:
        return cls(
            data["job_id"], data["queue"], data["type"], data["state"], _required_time(data["at"]),
            data["leasable"], [Reason.from_json(r) for r in data.get("reasons") or []],
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A heartbeat's answer: when the lease now ends, whether to stop, and whether the
    progress it carried was stored."""

    lease_id: str
    expires_at: datetime
    cancel_requested: bool
    progress_recorded: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Heartbeat:
        return cls(
            lease_id=data["lease_id"],
            expires_at=_required_time(data["expires_at"]),
            cancel_requested=bool(data.get("cancel_requested", False)),
            progress_recorded=bool(data.get("progress_recorded", False)),
        )


@dataclass(frozen=True, slots=True)
class AckResult:
    """What the single finishing call would have answered for this lease."""

    lease_id: str
    status: int
    code: str | None
    job_id: int | None
    state: JobState | None

    @property
    def ok(self) -> bool:
        return self.status == 200

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AckResult:
        return cls(
            lease_id=data["lease_id"],
            status=data["status"],
            code=data.get("code"),
            job_id=data.get("job_id"),
            state=data.get("state"),
        )


# ---- what the client sends ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ref:
    """In a batch enqueue, the batch's item `index` (an earlier one), as a parent."""

    index: int

    def to_json(self) -> dict[str, int]:
        return {"ref": self.index}


@dataclass(frozen=True, slots=True)
class Unique:
    """Uniqueness for an enqueue: one job of its type in the queue per `key`, per
    `period` (seconds, counted from the Unix epoch) and while in `states` (they must
    include waiting, queued and running; default: those and succeeded). When a job holds
    it, `on_conflict="return_existing"` (the default) answers that job;
    `"replace"` also gives it this enqueue's payload and run time if it is still queued.

        client.enqueue("mail", "digest", {"user": 42}, unique=Unique("digest:42", period=3600))
        client.enqueue("search", "reindex", doc, delay_seconds=5,
                       unique=Unique("doc:7", on_conflict="replace"))  # debounce
    """

    key: str
    period: int | None = None
    states: Sequence[JobState] | None = None
    on_conflict: Literal["return_existing", "replace"] | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"key": self.key}
        if self.period is not None:
            body["period"] = self.period
        if self.states is not None:
            body["states"] = list(self.states)
        if self.on_conflict is not None:
            body["on_conflict"] = self.on_conflict
        return body


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of a batch enqueue (`Client.enqueue_many`); `depends_on` may name job ids
    and earlier items of the batch (`Ref(i)`)."""

    type: str
    payload: Any = None
    priority: int | None = None
    run_at: datetime | None = None
    delay_seconds: float | None = None
    max_attempts: int | None = None
    lease_seconds: int | None = None
    idempotency_key: str | None = None
    metadata: dict[str, Any] | None = None
    depends_on: Sequence[int | Ref] | None = None
    on_parent_failure: OnParentFailure | None = None
    concurrency_key: str | None = None
    fairness_key: str | None = None
    unique: Unique | None = None
    timeout_seconds: int | None = None
    start_by: datetime | None = None
    trace: TraceContext | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type, "payload": self.payload}
        parents = None
        if self.depends_on is not None:
            parents = [p.to_json() if isinstance(p, Ref) else p for p in self.depends_on]
        optional = {
            "priority": self.priority,
            "run_at": self.run_at.isoformat() if self.run_at is not None else None,
            "delay_seconds": self.delay_seconds,
            "max_attempts": self.max_attempts,
            "lease_seconds": self.lease_seconds,
            "idempotency_key": self.idempotency_key,
            "metadata": self.metadata,
            "depends_on": parents,
            "on_parent_failure": self.on_parent_failure,
            "concurrency_key": self.concurrency_key,
            "fairness_key": self.fairness_key,
            "unique": self.unique.to_json() if self.unique is not None else None,
            "timeout_seconds": self.timeout_seconds,
            "start_by": self.start_by.isoformat() if self.start_by is not None else None,
            "trace": self.trace.to_json() if self.trace is not None else None,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        return body


@dataclass(frozen=True, slots=True)
class Complete:
    """An ack that completes a lease with a result (`Client.ack`)."""

    lease_id: str
    result: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"lease_id": self.lease_id, "outcome": "complete", "result": self.result}


@dataclass(frozen=True, slots=True)
class Fail:
    """An ack that fails a lease (`Client.ack`)."""

    lease_id: str
    error_type: str
    message: str = ""
    details: Any = None
    retryable: bool = True
    retry_after_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "lease_id": self.lease_id,
            "outcome": "fail",
            "error": error_body(self.error_type, self.message, self.details),
            "retryable": self.retryable,
        }
        if self.retry_after_seconds is not None:
            body["retry_after_seconds"] = self.retry_after_seconds
        return body


Ack = Complete | Fail

MAX_ERROR_TYPE_CHARS = 255


def error_body(error_type: str, message: str, details: Any) -> dict[str, Any]:
    """The `error` object of a failure, its type cut to what the service accepts."""
    body: dict[str, Any] = {"type": error_type[:MAX_ERROR_TYPE_CHARS] or "Error"}
    if message:
        body["message"] = message
    if details is not None:
        body["details"] = details
    return body
