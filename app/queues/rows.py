"""The rows the queues repository hands back: typed named tuples (see `app.jobs.rows`)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class QueueState(NamedTuple):
    """Whether a queue is paused, and since when."""

    name: str
    paused: bool
    paused_at: datetime | None


class QueueSettingsRow(NamedTuple):
    """A queue's settings row."""

    name: str
    max_backlog: int | None
    max_running: int | None
    max_running_per_key: int | None
    rate_limit_jobs: int | None
    rate_limit_seconds: float | None
    max_attempts: int | None
    lease_seconds: int | None
    backoff_base_seconds: float | None
    backoff_cap_seconds: float | None
    backoff_jitter: float | None
    retain_succeeded_seconds: float | None
    retain_failed_seconds: float | None
    ordering: str
    fair_weights: dict[str, float] | None
    rate_limit_per_key_jobs: int | None
    rate_limit_per_key_seconds: float | None
    aging_seconds: float | None
    aging_max: int | None
    timeout_seconds: int | None


class QueueOverview(NamedTuple):
    """A queue's jobs by state, its oldest due job's age, and whether it is paused."""

    queue: str
    queued: int
    due: int
    running: int
    waiting: int
    failed: int
    cancelled: int
    oldest_due_age_seconds: float | None
    paused: bool
    paused_at: datetime | None


class QueueLimits(NamedTuple):
    """A limited queue's limits, how full each is, and what they hold back."""

    queue: str
    max_running: int | None
    max_running_per_key: int | None
    rate_limit_jobs: int | None
    rate_limit_seconds: float | None
    rate_used: int
    running: int
    due: int
    held_by_key: int

    def throttled(self) -> dict[str, int]:
        """Due jobs each limit holds back now (all of them, for a full queue-wide limit)."""
        full = self.max_running is not None and self.running >= self.max_running
        spent = self.rate_limit_jobs is not None and self.rate_used >= self.rate_limit_jobs
        return {
            "max_running": self.due if full else 0,
            "max_running_per_key": self.held_by_key,
            "rate_limit": self.due if spent else 0,
        }


class QueueActivity(NamedTuple):
    """A queue's last minute and hour."""

    enqueued_1m: int
    enqueued_1h: int
    succeeded_1m: int
    succeeded_1h: int
    failed_1m: int
    failed_1h: int
    wait_seconds: list[float] | None  # p50, p95
    run_seconds: list[float] | None


class QueueFigures(NamedTuple):
    """The overview, and the last minute's and hour's activity."""

    overview: QueueOverview
    activity: QueueActivity


class RunningJob(NamedTuple):
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


class DatabaseHealth(NamedTuple):
    """What PostgreSQL reports about the jobs table and vacuum."""

    live_tuples: int | None
    dead_tuples: int | None
    last_autovacuum: datetime | None
    last_vacuum: datetime | None
    oldest_transaction_age_seconds: float | None
    oldest_xmin_age: int | None
    reaper_last_pass: datetime | None


class FailedGroup(NamedTuple):
    """Failed jobs of one type and error type."""

    type: str
    error_type: str | None
    jobs: int
    latest_message: str | None
    latest_failed_at: datetime | None


class Minute(NamedTuple):
    """One minute of a queue's throughput."""

    minute: datetime
    enqueued: int
    succeeded: int
    failed: int


class FairKeyLoad(NamedTuple):
    """A fairness key of a fair queue: its queued jobs (counted up to a bound), how many
    of them are due, and its running jobs."""

    fairness_key: str
    queued: int
    due: int
    running: int


class UnservedType(NamedTuple):
    """A type whose due jobs no worker leased lately: how long its oldest one has been
    due, and when a job of it was last leased (None: never)."""

    type: str
    oldest_due_age_seconds: float
    last_leased_at: datetime | None
