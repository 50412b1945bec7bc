"""The JSON shapes of cron schedules."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.api.types import JsonNumber, Name, Strict
from app.core.config import MAX_LEASE_SECONDS
from app.core.fields import MAX_ATTEMPTS_LIMIT, MAX_PRIORITY, MIN_PRIORITY
from app.jobs import JobState

CatchUp = Literal["latest", "none", "all"]
MAX_CATCH_UP = 1000
NEXT_RUNS_SHOWN = 5
RECENT_RUNS_SHOWN = 10
DEFAULT_SCHEDULES_PAGE = 100
MAX_SCHEDULES_PAGE = 500


class ScheduleIn(Strict):
    """A schedule: what to enqueue, and when."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "queue": "reports",
                    "type": "daily_report",
                    "payload": {"format": "pdf"},
                    "cron": "0 7 * * 1-5",
                    "timezone": "Europe/Paris",
                }
            ]
        }
    )

    queue: Name
    type: Name
    payload: Any = Field(
        default=None,
        description="At most `JOBQ_MAX_PAYLOAD_BYTES` of JSON, as a job's payload (and "
        "`metadata` too).",
    )
    cron: Annotated[str, StringConstraints(min_length=1, max_length=255)] = Field(
        description="5 fields (minute hour day-of-month month day-of-week) of numbers, `*`, "
        "ranges `1-5`, lists `1,15`, steps `*/15` or `1-30/5` and names (`jan`, `mon`), or 6 "
        "with the second first (`*/10 * * * * *`); an interval of whole hours, minutes and "
        "seconds, at least 1 s (`@every 10s`, `@every 1h30m`: its multiples since the Unix "
        "epoch); or @yearly, @monthly, @weekly, @daily, @midnight, @hourly. It must match "
        "some time."
    )
    timezone: Annotated[str, StringConstraints(min_length=1, max_length=64)] = Field(
        default="UTC",
        description="An IANA time zone (not `Factory` or `localtime`). A tick that does "
        "not exist there (clocks going forward) is skipped; one that happens twice (clocks "
        "going back) runs once.",
    )
    priority: Annotated[int, Field(ge=MIN_PRIORITY, le=MAX_PRIORITY), JsonNumber] = 0
    max_attempts: Annotated[int, Field(ge=1, le=MAX_ATTEMPTS_LIMIT), JsonNumber] | None = None
    lease_seconds: Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS), JsonNumber] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    paused: bool = Field(default=False, strict=True)
    catch_up: CatchUp = Field(
        default="latest",
        description="After downtime: enqueue the most recent missed tick (`latest`), none "
        "(`none`), or every one up to `catch_up_limit` (`all`, the most recent ones).",
    )
    catch_up_limit: Annotated[int, Field(ge=1, le=MAX_CATCH_UP), JsonNumber] = 100


class ScheduleRunOut(BaseModel):
    """A tick and the job it made (`job_state` null once retention deleted the job)."""

    tick: datetime
    job_id: int | None
    job_state: JobState | None
    refused: str | None = Field(description="Why no job was made (its queue was full).")


class ScheduleOut(BaseModel):
    """A schedule, its next ticks, and the last jobs it made."""

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
    catch_up: CatchUp
    catch_up_limit: int
    last_tick: datetime | None
    next_runs: list[datetime] = Field(description="The next ticks (none while paused).")
    recent_runs: list[ScheduleRunOut]
    created_at: datetime
    updated_at: datetime


class SchedulesOut(BaseModel):
    """A page of schedules by name; pass `next_after` as `after` for the next page."""

    schedules: list[ScheduleOut]
    next_after: str | None
