"""The parameters of the schedules' named SQL (`queries.sql`): a NamedTuple per statement,
its fields the statement's `:names` (see `app.db.statement`). Payloads and metadata go in
as JSON text."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class ByName(NamedTuple):
    name: str


class PutScheduleParams(NamedTuple):
    name: str
    queue: str
    type: str
    payload: str
    cron: str
    timezone: str
    priority: int
    max_attempts: int | None
    lease_seconds: int | None
    metadata: str
    paused: bool
    catch_up: str
    catch_up_limit: int
    next_tick: datetime


class ListSchedulesParams(NamedTuple):
    after: str  # the last name of the page before
    limit: int
    allowed_names: list[str] | None  # None, None: every queue
    allowed_patterns: list[str] | None


class PauseScheduleParams(NamedTuple):
    name: str
    paused: bool
    next_tick: datetime | None  # on resuming: the next tick (pausing keeps it)


class RecentRunsParams(NamedTuple):
    names: list[str]
    per_schedule: int


class DueSchedulesParams(NamedTuple):
    limit: int


class EnqueueTickParams(NamedTuple):
    queue: str
    type: str
    payload: str
    priority: int
    max_attempts: int | None
    lease_seconds: int | None
    idempotency_key: str | None
    metadata: str


class RecordRunParams(NamedTuple):
    schedule: str
    tick: datetime
    job_id: int | None
    refused: str | None  # why jobq.enqueue refused the tick's job


class AdvanceScheduleParams(NamedTuple):
    name: str
    last_tick: datetime | None  # None: keep the last one
    next_tick: datetime
