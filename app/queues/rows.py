"""The rows the queues repository hands back: frozen, slotted, typed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class QueueState:
    """Whether a queue is paused, and since when."""

    name: str
    paused: bool
    paused_at: datetime | None


@dataclass(frozen=True, slots=True)
class QueueSettingsRow:
    """A queue's settings row."""

    name: str
    max_backlog: int | None


@dataclass(frozen=True, slots=True)
class QueueOverview:
    """A queue's jobs by state, its oldest due job's age, and whether it is paused."""

    queue: str
    queued: int
    due: int
    running: int
    failed: int
    cancelled: int
    oldest_due_age_seconds: float | None
    paused: bool
    paused_at: datetime | None


@dataclass(frozen=True, slots=True)
class QueueFigures(QueueOverview):
    """The overview, and the last minute's and hour's activity."""

    enqueued_1m: int
    enqueued_1h: int
    succeeded_1m: int
    succeeded_1h: int
    failed_1m: int
    failed_1h: int
    wait_seconds: list[float] | None  # p50, p95
    run_seconds: list[float] | None


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job being worked on, with its progress."""

    id: int
    queue: str
    type: str
    attempt: int
    max_attempts: int
    worker_id: str | None
    attempted_at: datetime | None
    lease_expires_at: datetime | None
    cancel_requested: bool
    progress_percent: float | None
    progress_stage: str | None
    progress_message: str | None
    progress_updated_at: datetime | None


@dataclass(frozen=True, slots=True)
class DatabaseHealth:
    """What PostgreSQL reports about the jobs table and vacuum."""

    live_tuples: int | None
    dead_tuples: int | None
    last_autovacuum: datetime | None
    last_vacuum: datetime | None
    oldest_transaction_age_seconds: float | None
    oldest_xmin_age: int | None
