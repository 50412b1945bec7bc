"""Queue statistics: what is waiting, running and failing, and how the database copes.

`queues()` reads fresh figures for the API: a few statements whatever the number of
queues (see the statistics section of `app.db.queries` for why they stay cheap on a
large table). `snapshot()` feeds `/metrics`: it reads the cheaper overview at most every
`refresh_seconds`, one read at a time however many scrapes arrive, and remembers a
failed read just as long, so a database outage never makes scrapes pile up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.errors import DatabaseUnavailable
from app.db.repository import JobsRepository, Row

RUNNING_JOBS_SHOWN = 20  # per queue: the longest-running ones


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The overview `/metrics` shows: one row per queue, and the database's health.

    `ok` is false when the database could not be read (the rows are then empty).
    """

    queues: Sequence[Row] = field(default_factory=list)
    database: Row | None = None
    ok: bool = False
    taken_at: float = 0.0  # time.monotonic()


def _percentiles(values: list[float] | None) -> dict[str, float | None]:
    p50, p95 = values if values is not None else (None, None)
    return {"p50": p50, "p95": p95}


def _queue(row: Row | None, queue: str, running: Sequence[Row]) -> dict[str, Any]:
    def get(name: str, default: Any = 0) -> Any:
        return default if row is None else row[name]

    return {
        "queue": queue,
        "paused": get("paused", False),
        "paused_at": get("paused_at", None),
        "counts": {
            "queued": get("queued"),
            "due": get("due"),
            "running": get("running"),
            "failed": get("failed"),
            "cancelled": get("cancelled"),
        },
        "oldest_due_age_seconds": get("oldest_due_age_seconds", None),
        "last_minute": {
            "enqueued": get("enqueued_1m"),
            "succeeded": get("succeeded_1m"),
            "failed": get("failed_1m"),
        },
        "last_hour": {
            "enqueued": get("enqueued_1h"),
            "succeeded": get("succeeded_1h"),
            "failed": get("failed_1h"),
            "wait_seconds": _percentiles(get("wait_seconds", None)),
            "run_seconds": _percentiles(get("run_seconds", None)),
        },
        "running_jobs": [_running(job) for job in running],
    }


def _running(row: Row) -> dict[str, Any]:
    progress = None
    if row["progress_updated_at"] is not None:
        progress = {
            "percent": row["progress_percent"],
            "stage": row["progress_stage"],
            "message": row["progress_message"],
            "updated_at": row["progress_updated_at"],
        }
    return {
        "id": row["id"],
        "type": row["type"],
        "attempt": row["attempt"],
        "max_attempts": row["max_attempts"],
        "worker_id": row["worker_id"],
        "started_at": row["attempted_at"],
        "lease_expires_at": row["lease_expires_at"],
        "cancel_requested": row["cancel_requested"],
        "progress": progress,
    }


def database_view(row: Row) -> dict[str, Any]:
    """The database's health as the API shows it."""
    return {
        "jobs_live_tuples": row["live_tuples"],
        "jobs_dead_tuples": row["dead_tuples"],
        "jobs_last_autovacuum": row["last_autovacuum"],
        "jobs_last_vacuum": row["last_vacuum"],
        "oldest_transaction_age_seconds": row["oldest_transaction_age_seconds"],
        "oldest_xmin_age": row["oldest_xmin_age"],
    }


class StatsService:
    """Figures per queue for operators, and the cached overview behind `/metrics`."""

    def __init__(self, repo: JobsRepository, *, refresh_seconds: float) -> None:
        self._repo = repo
        self.refresh_seconds = refresh_seconds
        self._snapshot: Snapshot | None = None
        self._refreshing = asyncio.Lock()

    async def queue(self, queue: str) -> dict[str, Any]:
        """One queue's figures; a queue nothing ever named has all of them at zero."""
        rows = await self._repo.queue_stats(queue)
        running = await self._repo.running_jobs(queue, RUNNING_JOBS_SHOWN)
        return _queue(rows[0] if rows else None, queue, running)

    async def queues(self) -> dict[str, Any]:
        """Every known queue's figures, and the database's health."""
        rows = await self._repo.queue_stats(None)
        running: dict[str, list[Row]] = {}
        for job in await self._repo.running_jobs(None, RUNNING_JOBS_SHOWN):
            running.setdefault(job["queue"], []).append(job)
        health = await self._repo.database_health()
        return {
            "queues": [_queue(row, row["queue"], running.get(row["queue"], [])) for row in rows],
            "database": database_view(health),
        }

    async def snapshot(self) -> Snapshot:
        """The overview, read again only when older than `refresh_seconds`."""
        async with self._refreshing:
            cached = self._snapshot
            if cached is not None and time.monotonic() - cached.taken_at < self.refresh_seconds:
                return cached
            try:
                queues = await self._repo.queue_overview()
                health = await self._repo.database_health()
                fresh = Snapshot(queues, health, ok=True, taken_at=time.monotonic())
            except DatabaseUnavailable:
                fresh = Snapshot(taken_at=time.monotonic())
            self._snapshot = fresh
            return fresh
