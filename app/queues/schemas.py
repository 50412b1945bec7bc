"""The JSON shapes of queues: their settings, the operator actions on them, and their
statistics (`GET /v1/queues`, `GET /v1/queues/{queue}`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from app.api.types import JsonNumber, Name, ShortText, Strict, Timestamp
from app.core import timestamps
from app.jobs import ProgressOut

MAX_BACKLOG_LIMIT = 1_000_000  # each enqueue counts up to this many unfinished jobs


class QueueSettingsIn(Strict):
    """A queue's settings; `null` clears one."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"max_backlog": 10000}]})

    max_backlog: Annotated[int, Field(ge=1, le=MAX_BACKLOG_LIMIT), JsonNumber] | None = Field(
        description="Enqueue answers 429 `queue_full` once the queue holds this many unfinished "
        "(queued or running) jobs; `null`: no limit.",
    )


class QueueSettingsOut(BaseModel):
    """A queue's settings; a queue nobody configured has the defaults."""

    queue: str
    max_backlog: int | None


DEFAULT_REDRIVE_LIMIT = 1000
MAX_REDRIVE_LIMIT = 10_000


class RedriveIn(Strict):
    """Which failed jobs of the queue to send back, oldest failure first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"type": "send_email", "error_type": "SMTPTimeout", "limit": 500}]
        }
    )

    type: Name | None = Field(default=None, description="Only jobs of this type.")
    error_type: ShortText | None = Field(
        default=None, description="Only jobs whose `last_error.type` is this."
    )
    failed_since: Timestamp | None = Field(
        default=None,
        description=f"Only jobs that failed at or after this time ({timestamps.RANGE}).",
    )
    limit: Annotated[int, JsonNumber] = Field(
        default=DEFAULT_REDRIVE_LIMIT, ge=1, le=MAX_REDRIVE_LIMIT
    )
    reset_attempts: bool = Field(default=False, strict=True)


class RedriveOut(BaseModel):
    retried: int


class QueueStateOut(BaseModel):
    """Whether a queue is paused, and since when."""

    queue: str
    paused: bool
    paused_at: datetime | None


class PurgeIn(Strict):
    """Deleting a queue's queued jobs must name the queue again."""

    confirm: str = Field(max_length=255, description="The queue's name.")


class PurgeOut(BaseModel):
    deleted: int


# ---- statistics ----------------------------------------------------------------------


class StateCounts(BaseModel):
    """Jobs of the queue by state (succeeded jobs are counted only per window)."""

    queued: int
    due: int = Field(description="Queued jobs whose `run_at` has come.")
    running: int
    waiting: int = Field(description="Jobs waiting for the jobs they depend on.")
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
