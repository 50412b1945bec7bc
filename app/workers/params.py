"""The parameters of the workers' named SQL (`queries.sql`): a NamedTuple per statement,
its fields the statement's `:names` (see `app.db.statement`)."""

from __future__ import annotations

from typing import NamedTuple


class FlushPresenceParams(NamedTuple):
    seen: str  # a JSON array of objects, one per worker (`Presence.run_once`)


class ListWorkersParams(NamedTuple):
    allowed_names: list[str] | None  # None, None: every queue
    allowed_patterns: list[str] | None
    retain_seconds: float
    gone_seconds: float
    after: str | None
    limit: int


class QuietWorkerParams(NamedTuple):
    worker_id: str
    quiet: bool
    key_name: str | None


class PruneWorkersParams(NamedTuple):
    retain_seconds: float
    batch_size: int
