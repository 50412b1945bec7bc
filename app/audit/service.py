"""The audit log's rules: an admin action becomes a row (`AuditLog.record`, called by the
capture in `app.keys.audit` as the action's answer starts), pages of it are read newest
first with filters, and entries go once older than the audit retention (`AuditPruner`,
run by the maintenance leader)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from app.audit.params import AuditPageParams, RecordActionParams
from app.audit.repository import AuditRepository
from app.audit.rows import AuditRow
from app.core.names import MAX_BIGINT
from app.db.leader import prune_in_batches
from app.keys import AdminAction

log = logging.getLogger("jobq.audit")
SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """What a reader asked for (None: any)."""

    key_name: str | None = None
    action: str | None = None
    queue: str | None = None
    since: datetime | None = None


class AuditLog:
    """Writes admin actions, and reads them newest first."""

    def __init__(self, repo: AuditRepository) -> None:
        self._repo = repo

    async def record(self, action: AdminAction) -> None:
        await self._repo.record(
            RecordActionParams(
                key_name=action.key_name,
                action=action.action,
                method=action.method,
                path=action.path,
                queue=action.queue,
                job_id=action.job_id,
                target=action.target,
                detail=json.dumps(action.detail),
                status=action.status,
                request_id=action.request_id,
            )
        )

    async def page(self, where: AuditFilter, before: int | None, limit: int) -> list[AuditRow]:
        """Up to `limit` entries older than entry `before` (None: the newest), newest first."""
        return await self._repo.page(
            AuditPageParams(
                before=MAX_BIGINT if before is None else before,
                key_name=where.key_name,
                action=where.action,
                queue=where.queue,
                since=where.since,
                limit=limit,
            )
        )


class AuditPruner:
    """Deletes audit entries past retention (`retention_days`; 0 keeps them forever),
    every `interval_seconds`, a batch at a time."""

    def __init__(
        self,
        repo: AuditRepository,
        *,
        retention_days: float,
        interval_seconds: float,
        batch_size: int,
    ) -> None:
        self._repo = repo
        self.retain_seconds = retention_days * SECONDS_PER_DAY
        self.interval_seconds = interval_seconds if retention_days else 0.0
        self.batch_size = batch_size

    async def run_once(self) -> int | None:
        """Entries deleted; None when another replica leads."""
        if not self.retain_seconds:
            return 0
        total = await prune_in_batches(
            partial(self._repo.prune_batch, retain_seconds=self.retain_seconds), self.batch_size
        )
        if total:
            log.info("pruned %d audit entries", total)
        return total
