"""Runs the queues' named SQL (`queries.sql`) and hands back typed rows. Knows no rules."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import asyncpg

from app.core.errors import ValidationFailed
from app.db.database import Database, fetch_in
from app.db.statement import NO_PARAMS, NoParams, Queries
from app.queues.params import (
    BusiestFairKeysParams,
    ByQueue,
    ByQueueOrAll,
    FailedGroupsParams,
    PurgeQueuedParams,
    QueueSeriesParams,
    RedriveFailedParams,
    RunningJobsParams,
    SetQueueSettingsParams,
    UnservedTypesParams,
)
from app.queues.rows import (
    DatabaseHealth,
    FailedGroup,
    FairKeyLoad,
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

# The settings that do not go together (jobq.queues' checks): the field, and why.
_CONFLICTS = {
    "fair_limits_need_fair_ordering": (
        "ordering",
        "rate_limit_per_key and aging need the queue's ordering to be fair",
    ),
    "fair_ordering_without_max_running_per_key": (
        "max_running_per_key",
        "a fair queue takes no max_running_per_key (its turns go by fairness_key)",
    ),
}
REDRIVE_FAILED = QUERIES.bind("redrive_failed", RedriveFailedParams)
PAUSE_QUEUE = QUERIES.bind("pause_queue", ByQueue)
RESUME_QUEUE = QUERIES.bind("resume_queue", ByQueue)
PURGE_QUEUED = QUERIES.bind("purge_queued", PurgeQueuedParams)
GET_QUEUE_SETTINGS = QUERIES.bind("get_queue_settings", ByQueue)
SET_QUEUE_SETTINGS = QUERIES.bind("set_queue_settings", SetQueueSettingsParams)
SYNC_FAIR_KEYS = QUERIES.bind("sync_fair_keys", ByQueue)
QUEUE_OVERVIEW = QUERIES.bind("queue_overview", NoParams)
QUEUE_STATS = QUERIES.bind("queue_stats", ByQueueOrAll)
RUNNING_JOBS = QUERIES.bind("running_jobs", RunningJobsParams)
QUEUE_LIMITS = QUERIES.bind("queue_limits", ByQueueOrAll)
FAILED_GROUPS = QUERIES.bind("failed_groups", FailedGroupsParams)
QUEUE_SERIES = QUERIES.bind("queue_series", QueueSeriesParams)
DATABASE_HEALTH = QUERIES.bind("database_health", NoParams)
EVER_LEASED = QUERIES.bind("ever_leased", ByQueue)
UNSERVED_TYPES = QUERIES.bind("unserved_types", UnservedTypesParams)
BUSIEST_FAIR_KEYS = QUERIES.bind("busiest_fair_keys", BusiestFairKeysParams)


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
        params = RedriveFailedParams(
            queue=queue,
            type=type_,
            error_type=error_type,
            failed_since=failed_since,
            limit=limit,
            reset_attempts=reset_attempts,
        )
        record = await self._db.fetch_one(REDRIVE_FAILED, params)
        assert record is not None
        return int(record["retried"])

    async def pause(self, queue: str) -> QueueState:
        record = await self._db.fetch_one(PAUSE_QUEUE, ByQueue(queue))
        assert record is not None
        return QueueState._make(record)

    async def resume(self, queue: str) -> QueueState:
        record = await self._db.fetch_one(RESUME_QUEUE, ByQueue(queue))
        assert record is not None
        return QueueState._make(record)

    async def purge_queued(
        self, queue: str, *, batch_size: int, up_to: int | None
    ) -> tuple[int, int | None]:
        """(jobs deleted, the highest id a later batch may delete)."""
        params = PurgeQueuedParams(queue=queue, batch_size=batch_size, up_to=up_to)
        record = await self._db.fetch_one(PURGE_QUEUED, params)
        assert record is not None
        return int(record["deleted"]), record["up_to"]

    # ---- settings ----------------------------------------------------------------

    async def get_settings(self, queue: str) -> QueueSettingsRow | None:
        record = await self._db.fetch_one(GET_QUEUE_SETTINGS, ByQueue(queue))
        return None if record is None else QueueSettingsRow._make(record)

    async def set_settings(self, params: SetQueueSettingsParams) -> QueueSettingsRow:
        """Change the settings `params.given` names; the row as it now is. A change of
        ordering makes or drops the queue's fairness keys' rows in the same transaction.
        Settings that do not go together: `ValidationFailed`."""
        try:
            async with self._db.transaction() as conn:
                (record,) = await fetch_in(conn, SET_QUEUE_SETTINGS, params)
                if "ordering" in params.given:
                    await fetch_in(conn, SYNC_FAIR_KEYS, ByQueue(params.queue))
        except asyncpg.CheckViolationError as exc:
            field, message = _CONFLICTS[exc.constraint_name or ""]
            raise ValidationFailed.field((field,), message, "value_error") from None
        return QueueSettingsRow._make(record)

    # ---- statistics --------------------------------------------------------------

    async def overview(self) -> list[QueueOverview]:
        return [QueueOverview._make(r) for r in await self._db.fetch(QUEUE_OVERVIEW, NO_PARAMS)]

    async def figures(self, queue: str | None) -> list[QueueFigures]:
        records = await self._db.fetch(QUEUE_STATS, ByQueueOrAll(queue))
        overview = len(QueueOverview._fields)
        return [
            QueueFigures(QueueOverview._make(r[:overview]), QueueActivity._make(r[overview:]))
            for r in records
        ]

    async def limits(self, queue: str | None) -> list[QueueLimits]:
        """The limited queues' limits and use (one queue, or all)."""
        records = await self._db.fetch(QUEUE_LIMITS, ByQueueOrAll(queue))
        return [QueueLimits._make(record) for record in records]

    async def failed_groups(self, queue: str, limit: int) -> list[FailedGroup]:
        records = await self._db.fetch(FAILED_GROUPS, FailedGroupsParams(queue, limit))
        return [FailedGroup._make(record) for record in records]

    async def series(self, queue: str, minutes: int, step_minutes: int) -> list[Minute]:
        params = QueueSeriesParams(queue, minutes, step_minutes)
        records = await self._db.fetch(QUEUE_SERIES, params)
        return [Minute._make(record) for record in records]

    async def ever_leased(self, queue: str) -> bool:
        record = await self._db.fetch_one(EVER_LEASED, ByQueue(queue))
        return bool(record and record["ever_leased"])

    async def unserved_types(
        self, queue: str, head: int, idle_seconds: float
    ) -> list[UnservedType]:
        params = UnservedTypesParams(queue=queue, head=head, idle_seconds=idle_seconds)
        records = await self._db.fetch(UNSERVED_TYPES, params)
        return [UnservedType._make(record) for record in records]

    async def busiest_fair_keys(self, queue: str, keys: int, count_up_to: int) -> list[FairKeyLoad]:
        """A fair queue's `keys` keys with the most queued jobs (none for a fifo queue)."""
        params = BusiestFairKeysParams(queue=queue, count_up_to=count_up_to, keys=keys)
        records = await self._db.fetch(BUSIEST_FAIR_KEYS, params)
        return [FairKeyLoad._make(record) for record in records]

    async def running_jobs(self, queue: str | None, per_queue: int) -> list[RunningJob]:
        records = await self._db.fetch(RUNNING_JOBS, RunningJobsParams(queue, per_queue))
        return [RunningJob._make(record) for record in records]

    async def database_health(self) -> DatabaseHealth:
        record = await self._db.fetch_one(DATABASE_HEALTH, NO_PARAMS)
        assert record is not None
        return DatabaseHealth._make(record)
