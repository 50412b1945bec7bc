"""Schedules: keeping them (create or replace, pause, resume, delete) and reading them
with their next ticks and last runs. Knows nothing of HTTP."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from app.core.config import Settings
from app.core.errors import ScheduleNotFound, ValidationFailed
from app.jobs import encode_json
from app.schedules.cron import Cron, InvalidSchedule
from app.schedules.params import PutScheduleParams
from app.schedules.repository import SchedulesRepository
from app.schedules.rows import RunRow, ScheduleRow
from app.schedules.schemas import NEXT_RUNS_SHOWN, RECENT_RUNS_SHOWN


@dataclass(frozen=True, slots=True)
class Definition:
    """A schedule as an operator defines it: the job to enqueue (queue, type, payload,
    priority, attempts, lease, metadata), when (`cron` in `timezone`), whether it is
    `paused`, and which ticks missed while jobq was down to make up (`catch_up`, at most
    `catch_up_limit`)."""

    queue: str
    type: str
    payload: Any
    cron: str
    timezone: str
    priority: int
    max_attempts: int | None
    lease_seconds: int | None
    metadata: Mapping[str, Any]
    paused: bool
    catch_up: str
    catch_up_limit: int


# A definition's fields that `put` stores as it makes them (the cron normalised, JSON text).
_MADE = frozenset({"cron", "payload", "metadata"})


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule with what an operator looks at: its next ticks and last runs."""

    row: ScheduleRow
    next_runs: list[datetime]
    recent_runs: list[RunRow]


def _invalid(exc: InvalidSchedule) -> ValidationFailed:
    """422 naming the field that makes a schedule unusable."""
    return ValidationFailed.field((exc.field,), str(exc), "value_error")


def cron_of(schedule: Definition | ScheduleRow) -> Cron:
    """The schedule's cron, or 422 naming the field that makes it unusable (a new
    definition's strictly; a stored one's as it was accepted)."""
    try:
        return Cron(schedule.cron, schedule.timezone, strict=isinstance(schedule, Definition))
    except InvalidSchedule as exc:
        raise _invalid(exc) from None


def first_tick(cron: Cron) -> datetime:
    """The first tick after now, or 422 if there is none."""
    try:
        return cron.first_after(datetime.now(UTC))
    except InvalidSchedule as exc:
        raise _invalid(exc) from None


class Schedules:
    """Create, read, pause and delete schedules."""

    def __init__(self, repo: SchedulesRepository, settings: Settings) -> None:
        self._repo = repo
        self._settings = settings

    def _json(self, value: object, field: str) -> str:
        """A job's payload or metadata: the same rules and limits as an enqueue's."""
        return encode_json(
            value,
            field=(field,),
            max_bytes=self._settings.max_payload_bytes,
            max_depth=self._settings.max_json_depth,
        )

    async def put(self, name: str, schedule: Definition) -> tuple[Schedule, bool]:
        """Create or replace `name`; its next tick is the first after now."""
        cron = cron_of(schedule)
        params = PutScheduleParams(
            name=name,
            **{f.name: getattr(schedule, f.name) for f in fields(schedule) if f.name not in _MADE},
            cron=cron.expression,
            payload=self._json(schedule.payload, "payload"),
            metadata=self._json(schedule.metadata, "metadata"),
            next_tick=first_tick(cron),
        )
        row, created = await self._repo.put(params)
        return (await self._shown([row]))[0], created

    async def get(self, name: str) -> Schedule:
        row = await self._repo.get(name)
        if row is None:
            raise ScheduleNotFound(f"no schedule is named {name!r}", name=name)
        return (await self._shown([row]))[0]

    async def page(
        self, after: str, limit: int, allowed: tuple[list[str], list[str]] | None
    ) -> list[Schedule]:
        """Up to `limit` schedules by name after `after`, in the queues `allowed` (names,
        LIKE patterns; None: every queue)."""
        return await self._shown(await self._repo.page(after, limit, allowed))

    async def delete(self, name: str) -> None:
        if not await self._repo.delete(name):
            raise ScheduleNotFound(f"no schedule is named {name!r}", name=name)

    async def pause(self, name: str, paused: bool) -> Schedule:
        """Pause, or resume from the next tick after now (missed ones are not made up)."""
        current = await self.get(name)
        resume_at = None if paused else first_tick(cron_of(current.row))
        row = await self._repo.pause(name, paused, resume_at)
        if row is None:
            raise ScheduleNotFound(f"no schedule is named {name!r}", name=name)
        return (await self._shown([row]))[0]

    async def _shown(self, rows: list[ScheduleRow]) -> list[Schedule]:
        runs: dict[str, list[RunRow]] = {}
        for run in await self._repo.recent_runs([r.name for r in rows], RECENT_RUNS_SHOWN):
            runs.setdefault(run.schedule, []).append(run)
        shown = []
        for row in rows:
            upcoming: list[datetime] = []
            if not row.paused:
                cron = Cron(row.cron, row.timezone, strict=False)
                start = row.next_tick
                upcoming = [start, *islice(cron.after(start), NEXT_RUNS_SHOWN - 1)]
            shown.append(Schedule(row, upcoming, runs.get(row.name, [])))
        return shown
