"""The shapes of the queue statistics: `GET /v1/queues` and `GET /v1/queues/{queue}`."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from app.schemas import ProgressOut


class StateCounts(BaseModel):
    """Jobs of the queue by state (succeeded jobs are counted only per window)."""

    queued: int
    due: int = Field(description="Queued jobs whose `run_at` has come.")
    running: int
    failed: int
    cancelled: int


class Window(BaseModel):
    """What happened in a recent window."""

    enqueued: int = Field(description="Jobs created in the window (and still stored).")
    succeeded: int = Field(description="Jobs that succeeded in the window.")
    failed: int = Field(description="Jobs that ended `failed` (for good) in the window.")


class Percentiles(BaseModel):
    p50: float | None
    p95: float | None


class HourWindow(Window):
    wait_seconds: Percentiles = Field(
        description="From enqueue to first lease, of the jobs first leased in the last hour."
    )
    run_seconds: Percentiles = Field(
        description="How long the last attempt ran, of the jobs that succeeded or failed "
        "in the last hour."
    )


class RunningJob(BaseModel):
    """A job being worked on."""

    id: int
    type: str
    attempt: int
    max_attempts: int
    worker_id: str | None
    started_at: datetime | None = Field(description="When this attempt's lease began.")
    lease_expires_at: datetime | None
    cancel_requested: bool
    progress: ProgressOut | None


class QueueStats(BaseModel):
    """One queue's figures."""

    queue: str
    paused: bool
    paused_at: datetime | None
    counts: StateCounts
    oldest_due_age_seconds: float | None = Field(
        description="How long the oldest due queued job has been due; null when none is."
    )
    last_minute: Window
    last_hour: HourWindow
    running_jobs: list[RunningJob] = Field(
        description="The longest-running jobs, at most 20 (`counts.running` has them all)."
    )


class DatabaseHealth(BaseModel):
    """What the database reports about the jobs table and vacuum."""

    jobs_live_tuples: int | None
    jobs_dead_tuples: int | None = Field(
        description="Row versions vacuum has yet to remove from the jobs table."
    )
    jobs_last_autovacuum: datetime | None
    jobs_last_vacuum: datetime | None
    oldest_transaction_age_seconds: float | None = Field(
        description="Age of the oldest open transaction holding a snapshot in this "
        "database (it keeps vacuum from removing dead jobs); null when none is open."
    )
    oldest_xmin_age: int | None = Field(
        description="How many transactions old the oldest snapshot, replication slot or "
        "prepared transaction holding back vacuum is."
    )


class QueuesStats(BaseModel):
    """Every known queue: one with jobs queued, running, failed or cancelled, or
    finished in the last hour, or with settings (paused)."""

    queues: list[QueueStats]
    database: DatabaseHealth
