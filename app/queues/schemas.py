"""The JSON shapes of queues: their settings, the operator actions on them, and their
statistics (`GET /v1/queues`, `GET /v1/queues/{queue}`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.types import JsonNumber, Name, Percentiles, ShortText, Strict, Timestamp
from app.core import timestamps
from app.core.config import MAX_LEASE_SECONDS, MAX_TIMEOUT_SECONDS
from app.core.fields import MAX_ATTEMPTS_LIMIT
from app.jobs import ProgressOut
from app.push import PushDeliveriesOut, PushTargetIn, PushTargetOut

MAX_BACKLOG_LIMIT = 1_000_000  # each enqueue counts up to this many unfinished jobs


MAX_RUNNING_LIMIT = 1_000_000
MAX_RATE_JOBS = 1_000_000
MAX_RATE_SECONDS = 86_400.0
MAX_RETENTION_SECONDS = 10 * 365 * 86_400.0
Count = Annotated[int, Field(ge=1, le=MAX_RUNNING_LIMIT), JsonNumber]
Seconds = Annotated[float, Field(ge=0, le=MAX_RETENTION_SECONDS), JsonNumber]


class RateLimit(Strict):
    """At most `jobs` leased in any `per_seconds` (a sliding window, across replicas)."""

    jobs: Annotated[int, Field(ge=1, le=MAX_RATE_JOBS), JsonNumber]
    per_seconds: Annotated[float, Field(ge=0.001, le=MAX_RATE_SECONDS), JsonNumber]


MAX_WEIGHT = 1000.0
MAX_WEIGHTED_KEYS = 1000
MAX_AGING_BOOST = 32767
Ordering = Literal["fifo", "fair"]
Weight = Annotated[float, Field(ge=0.001, le=MAX_WEIGHT), JsonNumber]


class Aging(Strict):
    """A queued job's priority rises by 1 for each `per_seconds` it has waited since its
    `run_at`, by at most `max_boost` (a fair queue's claim orders each key's jobs so)."""

    per_seconds: Annotated[float, Field(ge=0.001, le=MAX_RATE_SECONDS), JsonNumber]
    max_boost: Annotated[int, Field(ge=1, le=MAX_AGING_BOOST), JsonNumber]


class QueueSettingsIn(Strict):
    """A queue's settings. Only the fields sent change; `null` clears one (no limit, or
    the service's default)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"max_backlog": 10000},
                {"max_running": 5, "rate_limit": {"jobs": 100, "per_seconds": 60}},
                {"max_running_per_key": 1, "max_attempts": 10, "backoff_cap_seconds": 600},
                {
                    "ordering": "fair",
                    "fair_weights": {"enterprise": 3},
                    "rate_limit_per_key": {"jobs": 10, "per_seconds": 1},
                    "aging": {"per_seconds": 30, "max_boost": 10},
                },
                {"push": {"url": "https://jobs.example.com/hooks/jobq", "secrets": ["whsec_…"]}},
            ]
        }
    )

    max_backlog: Annotated[int, Field(ge=1, le=MAX_BACKLOG_LIMIT), JsonNumber] | None = Field(
        default=None,
        description="Enqueue answers 429 `queue_full` once the queue holds this many unfinished "
        "(queued or running) jobs; `null`: no limit.",
    )
    max_running: Count | None = Field(
        default=None,
        description="At most this many of the queue's jobs run at once, across every worker "
        "and replica; `null`: no limit.",
    )
    max_running_per_key: Count | None = Field(
        default=None,
        description="At most this many jobs with the same `concurrency_key` run at once "
        "(1: one at a time per key); jobs without a key are not limited by it.",
    )
    rate_limit: RateLimit | None = Field(
        default=None, description="At most `jobs` leases in any `per_seconds`; `null`: none."
    )
    max_attempts: Annotated[int, Field(ge=1, le=MAX_ATTEMPTS_LIMIT), JsonNumber] | None = Field(
        default=None, description="Default attempts of the queue's jobs (a job's own wins)."
    )
    lease_seconds: Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS), JsonNumber] | None = Field(
        default=None, description="Default lease of the queue's jobs (a job's own wins)."
    )
    backoff_base_seconds: Seconds | None = Field(
        default=None, description="Retry backoff: base * 2^(attempt-1) ..."
    )
    backoff_cap_seconds: Seconds | None = Field(default=None, description="... at most this ...")
    backoff_jitter: Annotated[float, Field(ge=0, le=0.99), JsonNumber] | None = Field(
        default=None, description="... then ± this fraction."
    )
    retain_succeeded_seconds: Seconds | None = Field(
        default=None, description="Delete succeeded jobs this long after they finish."
    )
    retain_failed_seconds: Seconds | None = Field(
        default=None, description="Delete failed and cancelled jobs this long after."
    )
    ordering: Ordering | None = Field(
        default=None,
        description="`fifo` (best priority, then oldest, across the queue) or `fair` "
        "(leases take turns across the jobs' `fairness_key`s, each key's best job first); "
        "`null`: `fifo`. A fair queue takes no `max_running_per_key`.",
    )
    fair_weights: Annotated[dict[ShortText, Weight], Field(max_length=MAX_WEIGHTED_KEYS)] | None = (
        Field(
            default=None,
            description="A fair queue's share per fairness key (key → weight; unlisted keys "
            "weigh 1): a key of weight 3 gets three turns to another's one while both have "
            "due jobs.",
        )
    )
    rate_limit_per_key: RateLimit | None = Field(
        default=None,
        description="At most `jobs` leases of each fairness key in any `per_seconds` "
        "(a fair queue's); `null`: none.",
    )
    aging: Aging | None = Field(
        default=None,
        description="Raise a queued job's priority with its wait (a fair queue's), so a "
        "steady stream of better jobs cannot starve it; `null`: none.",
    )
    push: PushTargetIn | None = Field(
        default=None,
        description="Push the queue's jobs to this HTTP endpoint instead of letting workers "
        "lease them; `null`: pulled by workers again.",
    )
    timeout_seconds: Annotated[int, Field(ge=1, le=MAX_TIMEOUT_SECONDS), JsonNumber] | None = Field(
        default=None,
        description="Default execution timeout of the queue's jobs, set as they are "
        "enqueued (a job's own wins); `null`: none.",
    )

    @model_validator(mode="after")
    def _names_one(self) -> QueueSettingsIn:
        if not self.model_fields_set:
            raise ValueError("name at least one setting to change")
        return self


class QueueSettingsOut(BaseModel):
    """A queue's settings; `null`: no limit, or the service's default."""

    queue: str
    max_backlog: int | None
    max_running: int | None
    max_running_per_key: int | None
    rate_limit: RateLimit | None
    max_attempts: int | None
    lease_seconds: int | None
    backoff_base_seconds: float | None
    backoff_cap_seconds: float | None
    backoff_jitter: float | None
    retain_succeeded_seconds: float | None
    retain_failed_seconds: float | None
    ordering: Ordering
    fair_weights: dict[str, float] | None
    rate_limit_per_key: RateLimit | None
    aging: Aging | None
    push: PushTargetOut | None = Field(
        default=None, description="The queue's push target; `null`: workers lease its jobs."
    )
    timeout_seconds: int | None


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


class RateUse(RateLimit):
    used: int = Field(description="Jobs leased in the window that ends now.")


class Throttled(BaseModel):
    """Due jobs each limit holds back now."""

    max_running: int
    max_running_per_key: int
    rate_limit: int


class QueueLimitsOut(BaseModel):
    """A limited queue's limits in force and how full they are."""

    max_running: int | None
    max_running_per_key: int | None
    rate_limit: RateUse | None
    throttled: Throttled


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
    limits: QueueLimitsOut | None = Field(
        description="Its limits in force, when it has any (`max_running`, "
        "`max_running_per_key`, `rate_limit`)."
    )
    running_jobs: list[RunningJob] = Field(
        description="The longest-running jobs, at most 20 (`counts.running` has them all)."
    )


class UnservedTypeOut(BaseModel):
    """A type whose due jobs no worker leased lately."""

    type: str
    oldest_due_age_seconds: float = Field(
        description="How long its oldest due job (among the queue's first 1,000) has been due."
    )
    last_leased_at: datetime | None = Field(
        description="When a worker last leased a job of this type here; null: never."
    )


class FairKeyOut(BaseModel):
    """One fairness key of a fair queue, and its jobs."""

    fairness_key: str = Field(description='The key (`""`: the jobs enqueued without one).')
    queued: int = Field(description="Its queued jobs, counted up to 10,000.")
    due: int = Field(description="How many of those are due.")
    running: int


class QueueDetail(QueueStats):
    """One queue's figures, whether anything ever used it, and what nobody serves."""

    known: bool = Field(
        description="False for a queue with no jobs and no settings that no worker ever "
        "leased from: a misspelt name, most likely (its figures are all zero)."
    )
    unserved_types: list[UnservedTypeOut] = Field(
        description="The types whose jobs have been due over 5 minutes and that no worker "
        "leased in as long (looked for among the queue's first 1,000 due jobs): no worker "
        "serves them, or none runs."
    )
    fair_keys: list[FairKeyOut] = Field(
        description="A fair queue's busiest fairness keys (at most 20, most queued jobs "
        "first); empty for a fifo queue. `/metrics` has no label per key."
    )
    push: PushDeliveriesOut | None = Field(
        default=None,
        description="A pushed queue's deliveries of the last minute and hour, counted by "
        "every replica, and its circuit breaker; null for a pulled queue.",
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
    reaper_last_pass: datetime | None = Field(
        description="When the reaper last finished a pass as the maintenance leader, on "
        "whichever replica led; null before the first."
    )


class QueuesStats(BaseModel):
    """Every known queue: one with jobs queued, running, failed or cancelled, or
    finished in the last hour, or with settings (paused)."""

    queues: list[QueueStats]
    database: DatabaseHealth


class FailedGroupOut(BaseModel):
    """Failed jobs of one type and error type."""

    type: str
    error_type: str | None
    jobs: int
    latest_message: str | None
    latest_failed_at: datetime | None


class FailedGroupsOut(BaseModel):
    queue: str
    groups: list[FailedGroupOut]


class MinuteOut(BaseModel):
    """One step of the series: the jobs of the `step_minutes` from `minute` on."""

    minute: datetime
    enqueued: int
    succeeded: int
    failed: int


class QueueSeriesOut(BaseModel):
    queue: str
    step_minutes: int = Field(
        description="Minutes per step: 1 up to 6 hours, then more, so that a series has "
        "at most 360 steps (5 for a day, 30 for a week)."
    )
    minutes: list[MinuteOut]
