"""Runs the workers' named SQL (`queries.sql`) and hands back typed rows. Knows no rules."""

from __future__ import annotations

from pathlib import Path

from app.db.database import Database
from app.db.statement import Queries
from app.workers.params import (
    FlushPresenceParams,
    ListWorkersParams,
    PruneWorkersParams,
    QuietWorkerParams,
)
from app.workers.rows import QuietRow, WorkerRow

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
FLUSH_PRESENCE = QUERIES.bind("flush_presence", FlushPresenceParams)
LIST_WORKERS = QUERIES.bind("list_workers", ListWorkersParams)
QUIET_WORKER = QUERIES.bind("quiet_worker", QuietWorkerParams)
PRUNE_WORKERS = QUERIES.bind("prune_workers", PruneWorkersParams)


class WorkersRepository:
    """The workers table, one method per named statement."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def flush(self, seen: str) -> list[str]:
        """Record the workers seen (JSON, `FlushPresenceParams`); the quiet workers' ids."""
        rows = await self._db.fetch(FLUSH_PRESENCE, FlushPresenceParams(seen))
        return [row["worker_id"] for row in rows]

    async def page(self, params: ListWorkersParams) -> list[WorkerRow]:
        return [WorkerRow._make(r) for r in await self._db.fetch(LIST_WORKERS, params)]

    async def quiet(self, params: QuietWorkerParams) -> QuietRow | None:
        record = await self._db.fetch_one(QUIET_WORKER, params)
        return None if record is None else QuietRow._make(record)

    async def prune(self, retain_seconds: float, batch_size: int) -> int:
        """Workers deleted."""
        params = PruneWorkersParams(retain_seconds, batch_size)
        return len(await self._db.fetch(PRUNE_WORKERS, params))
