"""Runs the schedules' named SQL (`queries.sql`) and hands back typed rows. Knows no rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

import asyncpg

from app.db.database import Database, fetch_in
from app.db.leader import as_leader
from app.db.statement import Queries
from app.schedules.params import (
    AdvanceScheduleParams,
    ByName,
    DueSchedulesParams,
    EnqueueTickParams,
    ListSchedulesParams,
    PauseScheduleParams,
    PutScheduleParams,
    RecentRunsParams,
    RecordRunParams,
)
from app.schedules.rows import RunRow, ScheduleRow

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
PUT_SCHEDULE = QUERIES.bind("put_schedule", PutScheduleParams)
GET_SCHEDULE = QUERIES.bind("get_schedule", ByName)
LIST_SCHEDULES = QUERIES.bind("list_schedules", ListSchedulesParams)
DELETE_SCHEDULE = QUERIES.bind("delete_schedule", ByName)
PAUSE_SCHEDULE = QUERIES.bind("pause_schedule", PauseScheduleParams)
RECENT_RUNS = QUERIES.bind("recent_runs", RecentRunsParams)
DUE_SCHEDULES = QUERIES.bind("due_schedules", DueSchedulesParams)
ENQUEUE_TICK = QUERIES.bind("enqueue_tick", EnqueueTickParams)
RECORD_RUN = QUERIES.bind("record_run", RecordRunParams)
ADVANCE_SCHEDULE = QUERIES.bind("advance_schedule", AdvanceScheduleParams)

_REFUSALS = frozenset({"JQ422", "JQ413", "JQ429"})  # what jobq.enqueue raises when it refuses


class SchedulerPass:
    """One scheduler pass's transaction, holding the maintenance lock."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def due(self, limit: int) -> list[tuple[ScheduleRow, datetime]]:
        """The due schedules, locked, and the database's `now`."""
        records = await fetch_in(self._conn, DUE_SCHEDULES, DueSchedulesParams(limit))
        return [(ScheduleRow._make(r[:-1]), r["now"]) for r in records]

    async def enqueue(self, params: EnqueueTickParams) -> tuple[int | None, str | None, bool]:
        """(the tick's job id, None, whether its idempotency key was held already) or
        (None, why jobq.enqueue refused it, False); a refusal rolls back to a savepoint,
        so the pass goes on."""
        try:
            async with self._conn.transaction():
                (record,) = await fetch_in(self._conn, ENQUEUE_TICK, params)
        except asyncpg.PostgresError as exc:
            if exc.sqlstate not in _REFUSALS:
                raise
            return None, str(getattr(exc, "message", exc)), False
        return int(record["id"]), None, bool(record["deduplicated"])

    async def record(
        self, schedule: str, tick: datetime, job_id: int | None, refused: str | None
    ) -> None:
        params = RecordRunParams(schedule=schedule, tick=tick, job_id=job_id, refused=refused)
        await fetch_in(self._conn, RECORD_RUN, params)

    async def advance(self, name: str, last_tick: datetime | None, next_tick: datetime) -> None:
        params = AdvanceScheduleParams(name=name, last_tick=last_tick, next_tick=next_tick)
        await fetch_in(self._conn, ADVANCE_SCHEDULE, params)


class SchedulesRepository:
    """The schedules table, one method per named statement."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, params: PutScheduleParams) -> tuple[ScheduleRow, bool]:
        """The schedule as stored, and whether it was created (rather than replaced)."""
        record = await self._db.fetch_one(PUT_SCHEDULE, params)
        assert record is not None
        return ScheduleRow._make(record[1:]), bool(record["created"])

    async def get(self, name: str) -> ScheduleRow | None:
        record = await self._db.fetch_one(GET_SCHEDULE, ByName(name))
        return None if record is None else ScheduleRow._make(record)

    async def page(
        self, after: str, limit: int, allowed: tuple[list[str], list[str]] | None
    ) -> list[ScheduleRow]:
        """`allowed`: (queue names, LIKE patterns) to limit the page to; None: every queue."""
        names, patterns = allowed if allowed is not None else (None, None)
        params = ListSchedulesParams(after, limit, names, patterns)
        return [ScheduleRow._make(r) for r in await self._db.fetch(LIST_SCHEDULES, params)]

    async def delete(self, name: str) -> bool:
        return await self._db.fetch_one(DELETE_SCHEDULE, ByName(name)) is not None

    async def pause(
        self, name: str, paused: bool, next_tick: datetime | None
    ) -> ScheduleRow | None:
        params = PauseScheduleParams(name=name, paused=paused, next_tick=next_tick)
        record = await self._db.fetch_one(PAUSE_SCHEDULE, params)
        return None if record is None else ScheduleRow._make(record)

    async def recent_runs(self, names: list[str], per_schedule: int) -> list[RunRow]:
        params = RecentRunsParams(names=names, per_schedule=per_schedule)
        return [RunRow._make(r) for r in await self._db.fetch(RECENT_RUNS, params)]

    @asynccontextmanager
    async def leading(self) -> AsyncIterator[SchedulerPass | None]:
        """A scheduler pass as the maintenance leader; None when another replica leads."""
        async with as_leader(self._db) as leading:
            yield None if leading is None else SchedulerPass(leading[0])
