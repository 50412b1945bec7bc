"""Runs the audit log's named SQL (`queries.sql`) and hands back typed rows. Knows no
rules."""

from __future__ import annotations

from pathlib import Path

from app.audit.params import AuditPageParams, PruneAuditParams, RecordActionParams
from app.audit.rows import AuditRow
from app.db.database import Database, fetch_in
from app.db.leader import as_leader
from app.db.statement import Queries

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
RECORD_ACTION = QUERIES.bind("record_action", RecordActionParams)
AUDIT_PAGE = QUERIES.bind("audit_page", AuditPageParams)
PRUNE_AUDIT = QUERIES.bind("prune_audit", PruneAuditParams)


class AuditRepository:
    """The audit log table, one method per named statement."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(self, params: RecordActionParams) -> None:
        await self._db.fetch(RECORD_ACTION, params)

    async def page(self, params: AuditPageParams) -> list[AuditRow]:
        return [AuditRow._make(r) for r in await self._db.fetch(AUDIT_PAGE, params)]

    async def prune_batch(self, batch_size: int, retain_seconds: float) -> int | None:
        """Entries deleted, as the maintenance leader; None when another replica leads."""
        async with as_leader(self._db) as leading:
            if leading is None:
                return None
            params = PruneAuditParams(batch_size=batch_size, retain_seconds=retain_seconds)
            (record,) = await fetch_in(leading[0], PRUNE_AUDIT, params)
            return int(record["pruned"])
