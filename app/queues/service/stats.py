"""Queue statistics: what is waiting, running and failing, and how the database copes.

`figures()` reads fresh figures for the API: a few statements whatever the number of
queues (see the statistics part of `queries.sql` for why they stay cheap on a large
table). `snapshot()` feeds `/metrics`: it reads the cheaper overview at most every
`refresh_seconds`, one read at a time however many scrapes arrive, and remembers a
failed read just as long, so a database outage never makes scrapes pile up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.core.errors import DatabaseUnavailable
from app.queues.repository import QueuesRepository
from app.queues.rows import (
    DatabaseHealth,
    FailedGroup,
    FairKeyLoad,
    Minute,
    QueueFigures,
    QueueLimits,
    QueueOverview,
    RunningJob,
    UnservedType,
)

RUNNING_JOBS_SHOWN = 20
# A fair queue's busiest fairness keys shown, each one's queued jobs counted up to a bound
FAIR_KEYS_SHOWN = 20
FAIR_KEY_COUNT_UP_TO = 10_000
FAILED_GROUPS_SHOWN = 50  # per queue: the longest-running ones
# A type is unserved when its jobs have been due this long and no worker leased one in
# as long; it is looked for among the queue's first UNSERVED_HEAD_JOBS due jobs, where
# jobs that nobody leases gather.
UNSERVED_AFTER_SECONDS = 300.0
UNSERVED_HEAD_JOBS = 1000
# A series has at most SERIES_MAX_STEPS steps, each the first of SERIES_STEP_MINUTES that
# is long enough: an hour minute by minute, a day in 5 minutes, a week in 30.
SERIES_MAX_STEPS = 360
SERIES_STEP_MINUTES = (1, 5, 10, 15, 30, 60, 120, 240, 360, 720, 1440)


def series_step(minutes: int) -> int:
    """The step of a series of `minutes` minutes: at most SERIES_MAX_STEPS of them."""
    for step in SERIES_STEP_MINUTES:
        if -(-minutes // step) <= SERIES_MAX_STEPS:
            return step
    return SERIES_STEP_MINUTES[-1]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The overview `/metrics` shows: one row per queue, and the database's health.

    `ok` is false when the database could not be read (the rows are then empty).
    """

    queues: Sequence[QueueOverview] = field(default_factory=list)
    database: DatabaseHealth | None = None
    limits: Sequence[QueueLimits] = field(default_factory=list)
    ok: bool = False
    taken_at: float = 0.0  # time.monotonic()


@dataclass(frozen=True, slots=True)
class QueueReport:
    """One queue's figures (None: all zero, a queue nothing ever named) and running jobs.

    `known`: the queue has jobs, settings or was leased from (false: a typo, most likely);
    `unserved`: the types whose due jobs no worker leased lately (one queue's read only);
    `fair_keys`: a fair queue's busiest fairness keys (one queue's read only).
    """

    queue: str
    figures: QueueFigures | None
    running: list[RunningJob]
    limits: QueueLimits | None = None
    known: bool = True
    unserved: list[UnservedType] = field(default_factory=list)
    fair_keys: list[FairKeyLoad] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class QueuesReport:
    """Every known queue's figures, and the database's health."""

    queues: list[QueueReport]
    database: DatabaseHealth


class StatsService:
    """Figures per queue for operators, and the cached overview behind `/metrics`."""

    def __init__(self, repo: QueuesRepository, *, refresh_seconds: float) -> None:
        self._repo = repo
        self.refresh_seconds = refresh_seconds
        self._snapshot: Snapshot | None = None
        self._refreshing = asyncio.Lock()

    async def queue(self, queue: str) -> QueueReport:
        """One queue's figures; a queue nothing ever named has all of them at zero, and
        is not `known` unless a worker once leased from it."""
        rows = await self._repo.figures(queue)
        running = await self._repo.running_jobs(queue, RUNNING_JOBS_SHOWN)
        limits = await self._repo.limits(queue)
        known = bool(rows) or await self._repo.ever_leased(queue)
        unserved = await self._repo.unserved_types(
            queue, UNSERVED_HEAD_JOBS, UNSERVED_AFTER_SECONDS
        )
        fair_keys = await self._repo.busiest_fair_keys(queue, FAIR_KEYS_SHOWN, FAIR_KEY_COUNT_UP_TO)
        figures = rows[0] if rows else None
        return QueueReport(
            queue, figures, running, next(iter(limits), None), known, unserved, fair_keys
        )

    async def failed_groups(self, queue: str) -> list[FailedGroup]:
        """The queue's failed jobs by type and error type, biggest groups first."""
        return await self._repo.failed_groups(queue, FAILED_GROUPS_SHOWN)

    async def series(self, queue: str, minutes: int) -> tuple[int, list[Minute]]:
        """The queue's last `minutes` minutes: the step (minutes) and one row a step."""
        step = series_step(minutes)
        return step, await self._repo.series(queue, minutes, step)

    async def queues(self) -> QueuesReport:
        """Every known queue's figures, and the database's health."""
        rows = await self._repo.figures(None)
        running: dict[str, list[RunningJob]] = {}
        for job in await self._repo.running_jobs(None, RUNNING_JOBS_SHOWN):
            running.setdefault(job.queue, []).append(job)
        health = await self._repo.database_health()
        limits = {row.queue: row for row in await self._repo.limits(None)}
        reports = [
            QueueReport(
                row.overview.queue,
                row,
                running.get(row.overview.queue, []),
                limits.get(row.overview.queue),
            )
            for row in rows
        ]
        return QueuesReport(reports, health)

    async def snapshot(self) -> Snapshot:
        """The overview, read again only when older than `refresh_seconds`."""
        async with self._refreshing:
            cached = self._snapshot
            if cached is not None and time.monotonic() - cached.taken_at < self.refresh_seconds:
                return cached
            try:
                queues = await self._repo.overview()
                health = await self._repo.database_health()
                limits = await self._repo.limits(None)
                fresh = Snapshot(queues, health, limits, ok=True, taken_at=time.monotonic())
            except DatabaseUnavailable:
                fresh = Snapshot(taken_at=time.monotonic())
            self._snapshot = fresh
            return fresh
