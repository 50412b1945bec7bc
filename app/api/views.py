"""Database rows into the API's response shapes."""

from __future__ import annotations

from typing import Any

from app.db.repository import Row

_JOB_FIELDS = (
    "id", "queue", "type", "state", "priority", "payload", "attempt", "max_attempts",
    "lease_seconds", "run_at", "created_at", "started_at", "finished_at", "updated_at",
    "worker_id", "lease_expires_at", "cancel_requested", "result", "last_error",
    "idempotency_key", "metadata", "attempts",
)  # fmt: skip


def job(row: Row) -> dict[str, Any]:
    """A job row as `JobOut`; the lease token is never shown to readers."""
    view = {name: row[name] for name in _JOB_FIELDS}
    if row["progress_updated_at"] is None:
        view["progress"] = None
    else:
        view["progress"] = {
            "percent": row["progress_percent"],
            "stage": row["progress_stage"],
            "message": row["progress_message"],
            "updated_at": row["progress_updated_at"],
        }
    return view
