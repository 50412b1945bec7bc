"""The JSON shape of `GET /v1/jobs/{id}/explain`: why a job is not running now."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.jobs.rows import JobState
from app.jobs.schemas import DependencyOut

ReasonCode = Literal[
    "scheduled",
    "waiting_for_parents",
    "paused",
    "max_running",
    "max_running_per_key",
    "rate_limit",
    "rate_limit_per_key",
    "behind",
    "no_worker",
    "no_worker_for_type",
    "start_by",
    "start_by_passed",
    "pushed",
    "push_breaker_open",
    "running",
    "succeeded",
    "failed",
    "cancelled",
]


class ReasonOut(BaseModel):
    """One thing that holds the job back now, or how it ended."""

    code: ReasonCode = Field(description="What the reason is, stable for programs.")
    blocking: bool = Field(
        description="Whether this alone keeps the next lease of the queue from taking the job."
    )
    message: str = Field(description="The reason in words, for people.")
    until: datetime | None = Field(
        None, description="When it ends, if known: the run_at, or when a rate window frees."
    )
    since: datetime | None = Field(
        None, description="When it began, if known: the last lease of the queue or type."
    )
    count: int | None = Field(
        None, description="How many: running jobs, leases in the window, jobs ahead, parents."
    )
    limit: int | None = Field(None, description="The limit `count` is held to, if any.")
    more: bool = Field(False, description="`count` is a lower bound (more jobs are ahead).")
    parents: list[DependencyOut] = Field(
        default_factory=list, description="The first parents not finished yet, with their states."
    )


class ExplainOut(BaseModel):
    """Why a job is not running now: every reason that holds, or how it ended."""

    job_id: int
    queue: str
    type: str
    state: JobState
    at: datetime = Field(description="When the reasons were read.")
    leasable: bool = Field(
        description="Queued, and no reason blocks: the next lease of its queue takes it."
    )
    reasons: list[ReasonOut]
