"""Runs the queues' named SQL (`queries.sql`) and hands back typed rows. Knows no rules."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from app.db.database import Database
from app.db.statement import Queries
from app.queues.rows import (
    DatabaseHealth,
    FailedGroup,
    Minute,
    QueueActivity,
    QueueFigures,
    QueueLimits,
    QueueOverview,
    QueueSettingsRow,
    QueueState,
    RunningJob,
    UnservedType,
)

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
REDRIVE_FAILED = QUERIES["redrive_failed"]
PAUSE_QUEUE = QUERIES["pause_queue"]
RESUME_QUEUE = QUERIES["resume_queue"]
PURGE_QUEUED = QUERIES["purge_queued"]
GET_QUEUE_SETTINGS = QUERIES["get_queue_settings"]
SET_QUEUE_SETTINGS = QUERIES["set_queue_settings"]
QUEUE_OVERVIEW = QUERIES["queue_overview"]
QUEUE_STATS = QUERIES["queue_stats"]
RUNNING_JOBS = QUERIES["running_jobs"]
QUEUE_LIMITS = QUERIES["queue_limits"]
FAILED_GROUPS = QUERIES["failed_groups"]
QUEUE_SERIES = QUERIES["queue_series"]
DATABASE_HEALTH = QUERIES["database_health"]
EVER_LEASED = QUERIES["ever_leased"]
UNSERVED_TYPES = QUERIES["unserved_types"]


class QueuesRepository:
    """Queue settings, actions on whole queues, and statistics."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # ---- operator actions --------------------------------------------------------

    async def redrive(
        self,
        queue: str,
        *,
        type_: str | None,
        error_type: str | None,
        failed_since: datetime | None,
        limit: int,
        reset_attempts: bool,
    ) -> int:
        """How many failed jobs of `queue` went back to the queue."""
        record = await self._db.fetch_one(
            REDRIVE_FAILED,
            {
                "queue": queue,
                "type": type_,
                "error_type": error_type,
                "failed_since": failed_since,
                "limit": limit,
                "reset_attempts": reset_attempts,
            },
        )
        assert record is not None
        return int(record["retried"])

    async def pause(self, queue: str) -> QueueState:
        record = await self._db.fetch_one(PAUSE_QUEUE, {"queue": queue})
        assert record is not None
        return QueueState._make(record)

    async def resume(self, queue: str) -> QueueState:
        record = await self._db.fetch_one(RESUME_QUEUE, {"queue": queue})
        assert record is not None
        return QueueState._make(record)

    async def purge_queued(
        self, queue: str, *, batch_size: int, up_to: int | None
    ) -> tuple[int, int | None]:
        """(jobs deleted, the highest id a later batch may delete)."""
        record = await self._db.fetch_one(
            PURGE_QUEUED, {"queue": queue, "batch_size": batch_size, "up_to": up_to}
        )
        assert record is not None
        return int(record["deleted"]), record["up_to"]

    # ---- settings ----------------------------------------------------------------

    async def get_settings(self, queue: str) -> QueueSettingsRow | None:
        record = await self._db.fetch_one(GET_QUEUE_SETTINGS, {"queue": queue})
        return None if record is None else QueueSettingsRow._make(record)

    async def set_settings(self, queue: str, values: dict[str, Any]) -> QueueSettingsRow:
        """Change the settings in `values` (each column's name: its new value)."""
        params = {name: None for name in QueueSettingsRow._fields[1:]}
        params.update(values)
        rate_given = "rate_limit_jobs" in values or "rate_limit_seconds" in values
        given = [n for n in values if not n.startswith("rate_limit")] + (
            ["rate_limit"] if rate_given else []
        )
        record = await self._db.fetch_one(
            SET_QUEUE_SETTINGS, {**params, "queue": queue, "given": given}
        )
        assert record is not None
        return QueueSettingsRow._make(record)

    # ---- statistics --------------------------------------------------------------

    async def overview(self) -> list[QueueOverview]:
        return [QueueOverview._make(r) for r in await self._db.fetch(QUEUE_OVERVIEW, {})]

    async def figures(self, queue: str | None) -> list[QueueFigures]:
        records = await self._db.fetch(QUEUE_STATS, {"queue": queue})
        overview = len(QueueOverview._fields)
        return [
            QueueFigures(QueueOverview._make(r[:overview]), QueueActivity._make(r[overview:]))
            for r in records
        ]

    async def limits(self, queue: str | None) -> list[QueueLimits]:
        """The limited queues' limits and use (one queue, or all)."""
        records = await self._db.fetch(QUEUE_LIMITS, {"queue": queue})
        return [QueueLimits._make(record) for record in records]

    async def failed_groups(self, queue: str, limit: int) -> list[FailedGroup]:
        records = await self._db.fetch(FAILED_GROUPS, {"queue": queue, "limit": limit})
        return [FailedGroup._make(record) for record in records]

    async def series(self, queue: str, minutes: int) -> list[Minute]:
        records = await self._db.fetch(QUEUE_SERIES, {"queue": queue, "minutes": minutes})
        return [Minute._make(record) for record in records]

    async def ever_leased(self, queue: str) -> bool:
        record = await self._db.fetch_one(EVER_LEASED, {"queue": queue})
        return bool(record and record["ever_leased"])

    async def unserved_types(
        self, queue: str, head: int, idle_seconds: float
    ) -> list[UnservedType]:
        params = {"queue": queue, "head": head, "idle_seconds": idle_seconds}
        records = await self._db.fetch(UNSERVED_TYPES, params)
        return [UnservedType._make(record) for record in records]

    async def running_jobs(self, queue: str | None, per_queue: int) -> list[RunningJob]:
        records = await self._db.fetch(RUNNING_JOBS, {"queue": queue, "per_queue": per_queue})
        return [RunningJob._make(record) for record in records]

    async def database_health(self) -> DatabaseHealth:
        record = await self._db.fetch_one(DATABASE_HEALTH, {})
        assert record is not None
        return DatabaseHealth._make(record)
