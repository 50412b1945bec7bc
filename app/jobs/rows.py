"""The rows the queue core's repository hands back: frozen, slotted, typed.

`JobRow` holds every column of `jobq.jobs` in the table's order, so a record that
ends in `j.*` becomes one by position (a test compares the fields with the table).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job as stored."""

    id: int
    queue: str
    type: str
    payload: Any
    priority: int
    state: str
    run_at: datetime
    attempt: int
    max_attempts: int
    lease_seconds: int
    lease_id: UUID | None
    lease_expires_at: datetime | None
    current_lease_seconds: int | None
    worker_id: str | None
    attempted_at: datetime | None
    cancel_requested: bool
    progress_percent: float | None
    progress_stage: str | None
    progress_message: str | None
    progress_updated_at: datetime | None
    result: Any
    last_error: dict[str, Any] | None
    attempts: list[dict[str, Any]]
    idempotency_key: str | None
    metadata: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    lease_key_id: int | None

    @classmethod
    def of(cls, record: asyncpg.Record, start: int = 0) -> JobRow:
        """The job in `record`'s columns from `start` on (a statement's `j.*`)."""
        values = tuple(record)
        return cls(*values[start : start + _JOB_COLUMNS])


_JOB_COLUMNS = len(JobRow.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class Enqueued:
    """The job an enqueue created, or the one already holding its idempotency key."""

    job: JobRow
    deduplicated: bool


@dataclass(frozen=True, slots=True)
class Refused:
    """An enqueue refused by admission control: the queue holds `backlog` of `max_backlog`."""

    max_backlog: int
    backlog: int
    new_jobs: int = 1


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One job of a batch enqueue, in brief; `id` is None when its key changed hands."""

    ord: int
    id: int | None
    state: str | None
    deduplicated: bool


@dataclass(frozen=True, slots=True)
class Beat:
    """A heartbeat's effect: the lease's end, the cancel flag, and whether it was written."""

    written: bool
    lease_expires_at: datetime
    cancel_requested: bool


@dataclass(frozen=True, slots=True)
class FinishedBrief:
    """A job a batch of acks finished: what the answer and the metrics need."""

    ord: int
    id: int
    queue: str
    state: str
    attempt: int
    attempted_at: datetime | None
    updated_at: datetime
    last_error: dict[str, Any] | None
