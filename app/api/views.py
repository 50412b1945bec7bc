"""Database rows into the API's response shapes."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pydantic_core
from fastapi import Response

from app.db.repository import Row
from app.service.jobs import Lease

_JOB_FIELDS = (
    "id", "queue", "type", "state", "priority", "payload", "attempt", "max_attempts",
    "lease_seconds", "run_at", "created_at", "started_at", "finished_at", "updated_at",
    "worker_id", "lease_expires_at", "cancel_requested",
)  # fmt: skip
_JOB_FIELDS_AFTER_PROGRESS = ("result", "last_error", "idempotency_key", "metadata")
# What `AttemptOut` shows of a recorded attempt: not its lease token or API key.
_ATTEMPT_FIELDS = ("attempt", "worker_id", "started_at", "finished_at", "outcome", "error")
_ATTEMPT_TIMES = ("started_at", "finished_at")


def _attempt(record: dict[str, Any]) -> dict[str, Any]:
    view = {name: record.get(name) for name in _ATTEMPT_FIELDS}
    for name in _ATTEMPT_TIMES:  # jsonb holds them as ISO 8601 text
        value = view[name]
        if isinstance(value, str):
            view[name] = datetime.fromisoformat(value)
    return view


def _progress(row: Row) -> dict[str, Any] | None:
    if row["progress_updated_at"] is None:
        return None
    return {
        "percent": row["progress_percent"],
        "stage": row["progress_stage"],
        "message": row["progress_message"],
        "updated_at": row["progress_updated_at"],
    }


def job(row: Row) -> dict[str, Any]:
    """A job row as `JobOut` serializes it, fields in its order; the lease token is never
    shown to readers."""
    view = {name: row[name] for name in _JOB_FIELDS}
    view["progress"] = _progress(row)
    for name in _JOB_FIELDS_AFTER_PROGRESS:
        view[name] = row[name]
    view["attempts"] = [_attempt(record) for record in row["attempts"]]
    return view


def answer(content: Any, status_code: int = 200) -> Response:
    """`content`, built in its response schema's shape, serialized without FastAPI
    validating it again: for 100 jobs or acks that validation cost more CPU than the rest
    of the call. Each route answering this way has a test comparing its bytes with what
    its schema serializes."""
    return Response(
        pydantic_core.to_json(content), status_code=status_code, media_type="application/json"
    )


def job_answer(row: Row, status_code: int = 200, **extra: Any) -> Response:
    """`JobOut`, with `extra` fields after its own (`EnqueuedJob`'s `deduplicated`)."""
    content = job(row)
    content.update(extra)
    return answer(content, status_code)


def leases(granted: Iterable[Lease]) -> Response:
    """`LeasesOut`."""
    return answer(
        {
            "leases": [
                {"lease_id": lease.token, "expires_at": lease.expires_at, "job": job(lease.job)}
                for lease in granted
            ]
        }
    )
