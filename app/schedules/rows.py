"""The rows the schedules repository hands back."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from app.jobs import JobState


class ScheduleRow(NamedTuple):
    """A schedule as stored (every column of `jobq.schedules`, in order)."""

    name: str
    queue: str
    type: str
    payload: Any
    cron: str
    timezone: str
    priority: int
    max_attempts: int | None
    lease_seconds: int | None
    metadata: dict[str, Any]
    paused: bool
    catch_up: str
    catch_up_limit: int
    next_tick: datetime
    last_tick: datetime | None
    created_at: datetime
    updated_at: datetime


class RunRow(NamedTuple):
    """A tick of a schedule, and the job it made (its state; None once deleted)."""

    schedule: str
    tick: datetime
    job_id: int | None
    job_state: JobState | None
    refused: str | None
