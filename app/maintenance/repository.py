"""Runs the maintenance statements (`queries.sql`), each batch as the elected leader."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import asyncpg

from app.core.retry import Backoff
from app.db.database import Database, fetch_in
from app.db.leader import as_leader, clock
from app.db.statement import NO_PARAMS, NoParams, P, Queries, Statement
from app.jobs import JobState
from app.maintenance.params import (
    ExpiredLeasesParams,
    ExpireUnstartedParams,
    FoldStatDeltasParams,
    PruneFinishedParams,
    PruneQueueMinutesParams,
    ReapExpiredParams,
    TablesToVacuumParams,
)
from app.maintenance.rows import DeadRows, Expired, LeaderBatch, Reaped

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
REAP_EXPIRED = QUERIES.bind("reap_expired", ReapExpiredParams)
EXPIRE_UNSTARTED = QUERIES.bind("expire_unstarted", ExpireUnstartedParams)
EXPIRED_LEASES = QUERIES.bind("expired_leases", ExpiredLeasesParams)
PRUNE_FINISHED = QUERIES.bind("prune_finished", PruneFinishedParams)
FINISHED_PAST_RETENTION = QUERIES.bind("finished_past_retention", PruneFinishedParams)
TABLES_TO_VACUUM = QUERIES.bind("tables_to_vacuum", TablesToVacuumParams)
FOLD_STAT_DELTAS = QUERIES.bind("fold_stat_deltas", FoldStatDeltasParams)
FORGET_EMPTY_FAILED_GROUPS = QUERIES.bind("forget_empty_failed_groups", NoParams)
PRUNE_QUEUE_MINUTES = QUERIES.bind("prune_queue_minutes", PruneQueueMinutesParams)
PRUNE_PUSH_MINUTES = QUERIES.bind("prune_push_minutes", PruneQueueMinutesParams)

T = TypeVar("T")


def _state(record: asyncpg.Record) -> JobState:
    state: JobState = record["state"]  # the enum's label, as text
    return state


def _count(column: str) -> Callable[[asyncpg.Record], int]:
    def read(record: asyncpg.Record) -> int:
        return int(record[column])

    return read


class MaintenanceRepository:
    """Batches of maintenance work, each under the maintenance lock."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def _as_leader(
        self,
        statement: Statement[P],
        params: P,
        row: Callable[[asyncpg.Record], T],
    ) -> LeaderBatch[T] | None:
        """Run `statement` holding the maintenance lock; None when another replica holds it."""
        async with as_leader(self._db) as leading:
            if leading is None:
                return None
            conn, started = leading
            records = await fetch_in(conn, statement, params)
            return LeaderBatch([row(r) for r in records], started, await clock(conn))

    async def reap_batch(
        self,
        batch_size: int,
        backoff: Backoff,
        skip: list[int] | None = None,
        only: int | None = None,
    ) -> LeaderBatch[Reaped] | None:
        """One batch of expired leases (but `skip`; `only`: that job's alone); None when
        another replica is maintaining."""
        return await self._as_leader(
            REAP_EXPIRED,
            ReapExpiredParams(
                batch_size=batch_size,
                skip_ids=skip or [],
                only_id=only,
                backoff_base=backoff.base_seconds,
                backoff_cap=backoff.cap_seconds,
                backoff_jitter=backoff.jitter,
            ),
            Reaped._make,
        )

    async def expire_batch(self, batch_size: int) -> LeaderBatch[Expired] | None:
        """Cancel one batch of jobs not leased by their start deadline; None when another
        replica is maintaining."""
        return await self._as_leader(
            EXPIRE_UNSTARTED, ExpireUnstartedParams(batch_size), Expired._make
        )

    async def expired_leases(self, batch_size: int, skip: list[int]) -> list[int]:
        """The ids of up to `batch_size` jobs whose lease expired, but `skip`."""
        params = ExpiredLeasesParams(batch_size=batch_size, skip_ids=skip)
        records = await self._db.fetch(EXPIRED_LEASES, params)
        return [record["id"] for record in records]

    async def prune_batch(
        self,
        batch_size: int,
        succeeded_age: float | None,
        failed_age: float | None,
        skip: list[int] | None = None,
        only: int | None = None,
    ) -> LeaderBatch[JobState] | None:
        """The states of one batch of finished jobs deleted past retention (but `skip`;
        `only`: that job alone); None when another replica is maintaining."""
        params = PruneFinishedParams(batch_size, succeeded_age, failed_age, skip or [], only)
        return await self._as_leader(PRUNE_FINISHED, params, _state)

    async def finished_past_retention(
        self,
        batch_size: int,
        succeeded_age: float | None,
        failed_age: float | None,
        skip: list[int],
    ) -> list[int]:
        """The ids of up to `batch_size` finished jobs past retention, but `skip`."""
        params = PruneFinishedParams(batch_size, succeeded_age, failed_age, skip, None)
        return [record["id"] for record in await self._db.fetch(FINISHED_PAST_RETENTION, params)]

    async def fold_stat_deltas(self, batch_size: int) -> int | None:
        """How many statistics deltas one slice folded; None when another replica is
        maintaining."""
        batch = await self._as_leader(
            FOLD_STAT_DELTAS, FoldStatDeltasParams(batch_size), _count("folded")
        )
        return None if batch is None else batch.rows[0]

    async def forget_empty_failed_groups(self) -> int | None:
        """How many failed groups' counts down to no job were deleted; None when another
        replica is maintaining."""
        batch = await self._as_leader(FORGET_EMPTY_FAILED_GROUPS, NO_PARAMS, _count("forgotten"))
        return None if batch is None else batch.rows[0]

    async def prune_queue_minutes(self, batch_size: int, retain_seconds: float) -> int | None:
        """How many per-minute rollups past retention one batch deleted; None when
        another replica is maintaining."""
        params = PruneQueueMinutesParams(batch_size, retain_seconds)
        batch = await self._as_leader(PRUNE_QUEUE_MINUTES, params, _count("pruned"))
        return None if batch is None else batch.rows[0]

    async def prune_push_minutes(self, batch_size: int, retain_seconds: float) -> int | None:
        """How many per-minute delivery statistics past retention one batch deleted;
        None when another replica is maintaining."""
        params = PruneQueueMinutesParams(batch_size, retain_seconds)
        batch = await self._as_leader(PRUNE_PUSH_MINUTES, params, _count("pruned"))
        return None if batch is None else batch.rows[0]

    async def tables_to_vacuum(
        self, min_dead: int, fraction: float
    ) -> LeaderBatch[DeadRows] | None:
        """jobq's tables autovacuum will not clean, past the threshold; None when another
        replica is maintaining."""
        return await self._as_leader(
            TABLES_TO_VACUUM, TablesToVacuumParams(min_dead, fraction), DeadRows._make
        )

    async def vacuum(self, table: str) -> None:
        """`VACUUM (ANALYZE)` one table, named as `tables_to_vacuum` quoted it. It cannot
        run in a transaction, so it runs on its own, after the leader's has committed."""
        async with self._db.connection() as conn:
            await conn.execute(f"VACUUM (ANALYZE) {table}")
