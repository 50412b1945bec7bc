"""The parameters of the audit log's named SQL (`queries.sql`): a NamedTuple per
statement, its fields the statement's `:names` (see `app.db.statement`)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class RecordActionParams(NamedTuple):
    key_name: str | None  # None: no key (the service runs open, or it was not recognised)
    action: str
    method: str
    path: str
    queue: str | None
    job_id: int | None
    target: str | None
    detail: str  # JSON text
    status: int
    request_id: str


class AuditPageParams(NamedTuple):
    before: int  # the last id seen (the largest bigint: from the newest)
    key_name: str | None  # None: any
    action: str | None
    queue: str | None
    since: datetime | None
    limit: int


class PruneAuditParams(NamedTuple):
    batch_size: int
    retain_seconds: float
