"""Jobs as the API shows them: each response shaped here, from typed rows.

Each view is the one mapping from its rows to a response; the response schema is the one
list of its fields. A view builds exactly those fields, in the schema's order (held by
tests/unit/test_views.py), so the routes answering with many jobs (leases, acks) serialize
these dicts without FastAPI validating them again (`app.api.answers`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Protocol

from fastapi import Response

from app.api.answers import answer
from app.core.errors import JobqError
from app.jobs.rows import (
    ON_PARENT_FAILURE,
    UNIQUE_STATE_BITS,
    BatchItem,
    Dependency,
    Enqueued,
    JobRow,
    Parent,
)
from app.jobs.schemas import AttemptOut
from app.jobs.service import Explanation, Finished, Heartbeat, Lease

# What `AttemptOut` shows of a recorded attempt: not its lease token or API key.
_ATTEMPT_FIELDS = tuple(AttemptOut.model_fields)
_ATTEMPT_TIMES = ("started_at", "finished_at")


class HasProgress(Protocol):
    """A row with a job's progress columns."""

    @property
    def progress_percent(self) -> float | None: ...
    @property
    def progress_stage(self) -> str | None: ...
    @property
    def progress_message(self) -> str | None: ...
    @property
    def progress_updated_at(self) -> datetime | None: ...


def progress(row: HasProgress) -> dict[str, Any] | None:
    """`ProgressOut`, or None when the worker never reported any."""
    if row.progress_updated_at is None:
        return None
    return {
        "percent": row.progress_percent,
        "stage": row.progress_stage,
        "message": row.progress_message,
        "updated_at": row.progress_updated_at,
    }


def _attempt(record: dict[str, Any]) -> dict[str, Any]:
    view = {name: record.get(name) for name in _ATTEMPT_FIELDS}
    for name in _ATTEMPT_TIMES:  # jsonb holds them as ISO 8601 text
        value = view[name]
        if isinstance(value, str):
            view[name] = datetime.fromisoformat(value)
    return view


def job(row: JobRow) -> dict[str, Any]:
    """`JobOut`; the lease token is never shown to readers. One dict display, not one
    derived from `JobOut`'s fields: a lease shapes 100 jobs, and a display costs half of
    reading the fields off the row and zipping them with their names."""
    return {
        "id": row.id,
        "queue": row.queue,
        "type": row.type,
        "state": row.state,
        "priority": row.priority,
        "payload": row.payload,
        "attempt": row.attempt,
        "max_attempts": row.max_attempts,
        "lease_seconds": row.lease_seconds,
        "run_at": row.run_at,
        "created_at": row.created_at,
        "started_at": row.started_at,
        "finished_at": row.finished_at,
        "updated_at": row.updated_at,
        # a finished job keeps its last worker for its history, not shown here
        "worker_id": row.worker_id if row.state == "running" else None,
        "lease_expires_at": row.lease_expires_at,
        "cancel_requested": row.cancel_requested,
        "progress": None if row.progress_updated_at is None else progress(row),
        "result": row.result,
        "last_error": row.last_error,
        "idempotency_key": row.idempotency_key,
        "metadata": row.metadata,
        "waiting_for": row.waiting_for,
        "on_parent_failure": ON_PARENT_FAILURE[row.run_on_parent_failure],
        "concurrency_key": row.concurrency_key,
        # a fair queue's keyless jobs share the key '' (shown as none)
        "fairness_key": row.fairness_key or None,
        "unique": None if row.unique_key is None else unique(row),
        "timeout_seconds": row.timeout_seconds,
        "start_by": row.start_by,
        "snoozes": row.snoozes,
        "trace": None
        if row.traceparent is None
        else {"traceparent": row.traceparent, "tracestate": row.tracestate},
        "attempts": [_attempt(record) for record in row.history],
    }


def unique(row: JobRow) -> dict[str, Any]:
    """`UniqueOut`, of a job enqueued with `unique` options."""
    mask = row.unique_states or 0
    return {
        "key": row.unique_key,
        "period": row.unique_period,
        "since": row.unique_since if row.unique_period is not None else None,
        "states": [state for state, bit in UNIQUE_STATE_BITS.items() if mask & bit],
    }


def job_answer(row: JobRow, status_code: int = 200, **extra: Any) -> Response:
    """`JobOut`, with `extra` fields after its own (`EnqueuedJob`'s `deduplicated`)."""
    content = job(row)
    content.update(extra)
    return answer(content, status_code)


def enqueued(found: Enqueued) -> Response:
    """`EnqueuedJob`: 201 for a new job, 200 for the one already holding the key."""
    status = 200 if found.deduplicated else 201
    return job_answer(found.job, status, deduplicated=found.deduplicated, replaced=found.replaced)


def deduplicated_brief(found: Enqueued) -> Response:
    """`DeduplicatedBrief`: the job holding the key, to a caller that may not read it."""
    job = found.job
    return answer(
        {"id": job.id, "state": job.state, "deduplicated": True, "replaced": found.replaced}
    )


def batch(items: Iterable[BatchItem]) -> dict[str, Any]:
    """`BatchOut`."""
    return {
        "jobs": [
            {"id": i.id, "state": i.state, "deduplicated": i.deduplicated, "replaced": i.replaced}
            for i in items
        ]
    }


def page(rows: list[JobRow], limit: int) -> dict[str, Any]:
    """`JobsPage`: `next_after` when the page is full."""
    next_after = rows[-1].id if len(rows) == limit else None
    return {"jobs": [job(row) for row in rows], "next_after": next_after}


def _parent(parent: Parent) -> dict[str, Any]:
    return {"id": parent.id, "type": parent.type, "state": parent.state, "result": parent.result}


def timeout_at(row: JobRow) -> datetime | None:
    """When the running attempt of `row` times out (None: it has no timeout)."""
    if row.timeout_seconds is None or row.attempted_at is None:
        return None
    return row.attempted_at + timedelta(seconds=row.timeout_seconds)


def _leases(granted: Iterable[Lease]) -> list[dict[str, Any]]:
    return [
        {
            "lease_id": lease.token,
            "expires_at": lease.expires_at,
            "timeout_at": timeout_at(lease.job),
            "job": job(lease.job),
            "parents": [_parent(p) for p in lease.parents],
        }
        for lease in granted
    ]


def leases(granted: Iterable[Lease]) -> Response:
    """`LeasesOut`."""
    return answer({"leases": _leases(granted)})


def dependencies(found: Iterable[Dependency]) -> dict[str, Any]:
    """`DependenciesOut`."""
    sides: dict[str, list[dict[str, Any]]] = {"parent": [], "child": []}
    for d in found:
        sides[d.side].append({"id": d.id, "queue": d.queue, "type": d.type, "state": d.state})
    return {"parents": sides["parent"], "children": sides["child"]}


def heartbeat(beat: Heartbeat) -> dict[str, Any]:
    """`HeartbeatOut`."""
    return {
        "lease_id": beat.token,
        "expires_at": beat.expires_at,
        "cancel_requested": beat.cancel_requested,
        "progress_recorded": beat.progress_recorded,
    }


def _ack_result(finished: Finished) -> dict[str, Any]:
    error: JobqError | None = finished.error
    # A lease never issued or taken with another key, or an ack refused for its own
    # content (413, 422), says nothing about any job.
    job = finished.job if error is None or error.status not in (403, 404, 413, 422) else None
    return {
        "lease_id": finished.token,
        "status": error.status if error else 200,
        "code": error.code if error else None,
        "job_id": job.id if job is not None else None,
        "state": job.state if job is not None else None,
    }


def acks(finished: Iterable[Finished], granted: Iterable[Lease] | None = None) -> Response:
    """`AcksOut`: one result per ack, in order (an applied one's built in place), and
    the leases taken in the same call (None: it asked for none)."""
    results = [
        {"lease_id": f.token, "status": 200, "code": None, "job_id": f.job.id, "state": f.job.state}
        if f.error is None and f.job is not None
        else _ack_result(f)
        for f in finished
    ]
    return answer({"results": results, "leases": None if granted is None else _leases(granted)})


def explanation(found: Explanation) -> dict[str, Any]:
    """`ExplainOut`."""
    f = found.facts
    reasons = [
        {
            "code": r.code,
            "blocking": r.blocking,
            "message": r.message,
            "until": r.until,
            "since": r.since,
            "count": r.count,
            "limit": r.limit,
            "more": r.more,
            "parents": r.parents,
        }
        for r in found.reasons
    ]
    return {
        "job_id": f.id,
        "queue": f.queue,
        "type": f.type,
        "state": f.state,
        "at": f.at,
        "leasable": found.leasable,
        "reasons": reasons,
    }
