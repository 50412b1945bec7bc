"""Runs the maintenance statements (`queries.sql`), each batch as the elected leader."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

from app.core.retry import Backoff
from app.db.database import Database, fetch_in
from app.db.statement import Queries, Statement
from app.maintenance.rows import LeaderBatch, Reaped

MAINTENANCE_LOCK_KEY = 0x6A6F_6271_0002  # "jobq" + 2: held by the replica reaping or pruning

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
TRY_MAINTENANCE_LOCK = QUERIES["try_maintenance_lock"]
CLOCK = QUERIES["clock"]
REAP_EXPIRED = QUERIES["reap_expired"]
PRUNE_FINISHED = QUERIES["prune_finished"]

T = TypeVar("T")


class MaintenanceRepository:
    """Batches of maintenance work, each under the maintenance lock."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def _as_leader(
        self,
        statement: Statement,
        params: dict[str, Any],
        row: Callable[[asyncpg.Record], T],
    ) -> LeaderBatch[T] | None:
        """Run `statement` holding the maintenance lock; None when another replica holds it."""
        async with self._db.transaction() as conn:
            (lock,) = await fetch_in(conn, TRY_MAINTENANCE_LOCK, {"key": MAINTENANCE_LOCK_KEY})
            leader, started = lock
            if not leader:
                return None
            records = await fetch_in(conn, statement, params)
            ended = await conn.fetchval(CLOCK.sql)
            return LeaderBatch([row(r) for r in records], float(started), float(ended))

    async def reap_batch(self, batch_size: int, backoff: Backoff) -> LeaderBatch[Reaped] | None:
        """One batch of expired leases; None when another replica is maintaining."""
        return await self._as_leader(
            REAP_EXPIRED,
            {"batch_size": batch_size, **backoff.params()},
            Reaped._make,
        )

    async def prune_batch(
        self, batch_size: int, succeeded_age: float | None, failed_age: float | None
    ) -> LeaderBatch[str] | None:
        """The states of one batch of finished jobs deleted past retention; None when
        another replica is maintaining."""
        return await self._as_leader(
            PRUNE_FINISHED,
            {"batch_size": batch_size, "succeeded_age": succeeded_age, "failed_age": failed_age},
            lambda record: str(record["state"]),
        )
