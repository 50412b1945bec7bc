"""Each API call as data: method, path, body and how to read the answer.

`Client` and `AsyncClient` only differ in how they send a `Call`; what is sent and
how the answer is read is written once, here.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from jobq_client import _tracing
from jobq_client._models import (
    Ack,
    AckResult,
    BatchItem,
    Dependencies,
    Enqueued,
    Explanation,
    Heartbeat,
    JobRecord,
    JobsPage,
    JobSpec,
    JobState,
    Lease,
    error_body,
)

T = TypeVar("T")
LONG_POLL_MARGIN_SECONDS = 10.0  # a long-polling lease may take this much longer to answer
QUIET_HEADER = "jobq-worker-quiet"  # `1`: the worker is quiet, it was leased nothing


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request and the reader of its successful answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    body: Any = None
    has_body: bool = False
    params: dict[str, str | int | float] | None = None
    min_timeout: float | None = None  # at least this long to answer (long poll)
    headers: dict[str, str] | None = None  # besides the client's (a worker's own)


def _segment(value: str) -> str:
    return quote(value, safe="")


def new_idempotency_key() -> str:
    """A random key, so that retrying an enqueue cannot create a second job."""
    return uuid.uuid4().hex


def _json(response: httpx.Response) -> Any:
    return response.json()


def enqueue(queue: str, spec: JobSpec) -> Call[Enqueued]:
    body = spec.to_json()
    body.setdefault("idempotency_key", new_idempotency_key())
    return Call(
        "POST",
        f"/v1/queues/{_segment(queue)}/jobs",
        lambda r: Enqueued.from_json(_json(r)),
        body=body,
        has_body=True,
        headers=_tracing.headers(),  # the job's `trace`, unless the spec has its own
    )


def enqueue_many(queue: str, specs: Iterable[JobSpec]) -> Call[list[BatchItem]]:
    jobs = []
    for spec in specs:
        body = spec.to_json()
        body.setdefault("idempotency_key", new_idempotency_key())
        jobs.append(body)
    return Call(
        "POST",
        f"/v1/queues/{_segment(queue)}/jobs/batch",
        lambda r: [BatchItem.from_json(item) for item in _json(r)["jobs"]],
        body={"jobs": jobs},
        has_body=True,
        headers=_tracing.headers(),
    )


def get_job(job_id: int, wait_seconds: float = 0) -> Call[JobRecord]:
    """The job; with `wait_seconds`, once it finished or that time passed."""
    return Call(
        "GET",
        f"/v1/jobs/{int(job_id)}",
        lambda r: JobRecord.from_json(_json(r)),
        params={"wait_seconds": wait_seconds} if wait_seconds else None,
        min_timeout=wait_seconds + LONG_POLL_MARGIN_SECONDS if wait_seconds else None,
    )


def explain_job(job_id: int) -> Call[Explanation]:
    return Call(
        "GET",
        f"/v1/jobs/{int(job_id)}/explain",
        lambda r: Explanation.from_json(_json(r)),
    )


def get_dependencies(job_id: int) -> Call[Dependencies]:
    return Call(
        "GET",
        f"/v1/jobs/{int(job_id)}/dependencies",
        lambda r: Dependencies.from_json(_json(r)),
    )


def list_jobs(
    *,
    queue: str | None,
    state: JobState | None,
    type: str | None,
    limit: int | None,
    after: int | None,
) -> Call[JobsPage]:
    given = {"queue": queue, "state": state, "type": type, "limit": limit, "after": after}
    params: dict[str, str | int | float] = {k: v for k, v in given.items() if v is not None}
    return Call("GET", "/v1/jobs", lambda r: JobsPage.from_json(_json(r)), params=params)


def cancel_job(job_id: int) -> Call[JobRecord]:
    return Call("POST", f"/v1/jobs/{int(job_id)}/cancel", lambda r: JobRecord.from_json(_json(r)))


def _lease_body(
    queues: Sequence[str],
    worker_id: str,
    max_jobs: int,
    types: Sequence[str],
    lease_seconds: int | None,
    wait_seconds: float,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "queues": list(queues),
        "worker_id": worker_id,
        "max_jobs": max_jobs,
        "wait_seconds": wait_seconds,
    }
    if types:
        body["types"] = list(types)
    if lease_seconds is not None:
        body["lease_seconds"] = lease_seconds
    return body


def _leases(answer: Any) -> list[Lease]:
    return [Lease.from_json(item) for item in answer["leases"]]


def lease(
    queues: Sequence[str],
    *,
    worker_id: str,
    max_jobs: int,
    types: Sequence[str],
    lease_seconds: int | None,
    wait_seconds: float,
) -> Call[list[Lease]]:
    return Call(
        "POST",
        "/v1/leases",
        lambda r: _leases(_json(r)),
        body=_lease_body(queues, worker_id, max_jobs, types, lease_seconds, wait_seconds),
        has_body=True,
        min_timeout=wait_seconds + LONG_POLL_MARGIN_SECONDS if wait_seconds else None,
    )


def heartbeat(
    lease_id: str,
    *,
    extend_seconds: int | None,
    percent: float | None,
    stage: str | None,
    message: str | None,
) -> Call[Heartbeat]:
    body: dict[str, Any] = {}
    if extend_seconds is not None:
        body["extend_seconds"] = extend_seconds
    progress = {"percent": percent, "stage": stage, "message": message}
    if any(value is not None for value in progress.values()):
        body["progress"] = {key: value for key, value in progress.items() if value is not None}
    return Call(
        "POST",
        f"/v1/leases/{_segment(lease_id)}/heartbeat",
        lambda r: Heartbeat.from_json(_json(r)),
        body=body,
        has_body=True,
    )


def complete(lease_id: str, result: Any) -> Call[JobRecord]:
    return Call(
        "POST",
        f"/v1/leases/{_segment(lease_id)}/complete",
        lambda r: JobRecord.from_json(_json(r)),
        body={"result": result},
        has_body=True,
    )


def fail(
    lease_id: str,
    *,
    error_type: str,
    message: str,
    details: Any,
    retryable: bool,
    retry_after_seconds: float | None,
) -> Call[JobRecord]:
    body: dict[str, Any] = {
        "error": error_body(error_type, message, details),
        "retryable": retryable,
    }
    if retry_after_seconds is not None:
        body["retry_after_seconds"] = retry_after_seconds
    return Call(
        "POST",
        f"/v1/leases/{_segment(lease_id)}/fail",
        lambda r: JobRecord.from_json(_json(r)),
        body=body,
        has_body=True,
    )


def snooze(lease_id: str, seconds: float) -> Call[JobRecord]:
    return Call(
        "POST",
        f"/v1/leases/{_segment(lease_id)}/snooze",
        lambda r: JobRecord.from_json(_json(r)),
        body={"seconds": seconds},
        has_body=True,
    )


def _ack_results(answer: Any) -> list[AckResult]:
    return [AckResult.from_json(item) for item in answer["results"]]


def ack(acks: Iterable[Ack]) -> Call[list[AckResult]]:
    return Call(
        "POST",
        "/v1/acks",
        lambda r: _ack_results(_json(r)),
        body={"acks": [a.to_json() for a in acks]},
        has_body=True,
    )


def ack_and_lease(
    acks: Iterable[Ack],
    queues: Sequence[str],
    *,
    worker_id: str,
    max_jobs: int,
    types: Sequence[str],
    lease_seconds: int | None,
    wait_seconds: float,
) -> Call[tuple[list[AckResult], list[Lease]]]:
    def parse(response: httpx.Response) -> tuple[list[AckResult], list[Lease]]:
        answer = _json(response)
        return _ack_results(answer), _leases(answer)

    lease = _lease_body(queues, worker_id, max_jobs, types, lease_seconds, wait_seconds)
    return Call(
        "POST",
        "/v1/acks",
        parse,
        body={"acks": [a.to_json() for a in acks], "lease": lease},
        has_body=True,
        min_timeout=wait_seconds + LONG_POLL_MARGIN_SECONDS if wait_seconds else None,
    )


def telling_quiet(call: Call[T]) -> Call[tuple[T, bool]]:
    """`call`, whose answer also says whether its worker is quiet (to lease no more)."""

    def parse(response: httpx.Response) -> tuple[T, bool]:
        quiet: str = response.headers.get(QUIET_HEADER, "")
        return call.parse(response), quiet == "1"

    return dataclasses.replace(call, parse=parse)  # type: ignore[arg-type, return-value]


def presence(worker_id: str, queues: Sequence[str], types: Sequence[str]) -> Call[bool]:
    """An idle worker's sign of life; whether it is quiet."""
    return Call(
        "POST",
        f"/v1/workers/{_segment(worker_id)}/presence",
        lambda r: bool(_json(r)["quiet"]),
        body={"queues": list(queues), "types": list(types)},
        has_body=True,
    )
