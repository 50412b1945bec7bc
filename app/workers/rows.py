"""Typed rows of the workers' named SQL: fields are the statement's columns in order."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class WorkerRow(NamedTuple):
    """A worker as `GET /v1/workers` lists it."""

    worker_id: str
    sdk: str | None
    version: str | None
    host: str | None
    queues: list[str]
    types: list[str]
    first_seen: datetime | None
    last_seen: datetime | None
    gone: bool
    running: int
    job_ids: list[int]
    next_expiry: datetime | None
    leased: int
    finished: int
    finished_per_minute: float
    quiet: bool
    quiet_at: datetime | None
    quieted_by: str | None


class QuietRow(NamedTuple):
    """A worker's quiet state, as a quiet or resume left it."""

    worker_id: str
    quiet: bool
    quiet_at: datetime | None
    quieted_by: str | None
