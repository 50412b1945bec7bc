"""The scheduler: the replica holding the maintenance lock enqueues every schedule's due
ticks, each exactly once.

Shaped like the reaper: `run_once()` does one pass and returns what it did; the loop
adds the interval. A pass locks the due schedules, enqueues their ticks through
`jobq.enqueue` with the idempotency key `schedule:<name>:<tick>`, records each run and
advances `next_tick`, all in one transaction: a replica that dies mid-pass leaves
nothing behind, and the next pass (on whichever replica leads) does it again.

So no tick is made twice, and a job already holding a tick's key was made by someone
else: the HTTP API refuses the `schedule:` prefix, but a database role might take it.
The scheduler never adopts such a job as its run; it makes the tick's job without a key.

Ticks that came within `ON_TIME_SECONDS` are on time: a pass makes every one of them
(a schedule that ticks every second may have several due when a pass runs late).
After downtime (`catch_up`), with no tick on time: `latest` makes the most recent missed
tick only; `none` makes none of them; `all` makes each one, on time or not, at most
`catch_up_limit` (the most recent).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.core.logging import event
from app.core.names import TICK_KEY_PREFIX
from app.schedules.cron import Cron
from app.schedules.params import EnqueueTickParams
from app.schedules.repository import SchedulerPass, SchedulesRepository
from app.schedules.rows import ScheduleRow

ON_TIME_SECONDS = 60.0  # a tick made up to this late is on time, not a missed one
# every tick on time, for a schedule that ticks each second (the floor)
MAX_ON_TIME_TICKS = int(ON_TIME_SECONDS) + 1
DUE_BATCH = 100  # schedules handled per transaction
log = logging.getLogger("jobq.scheduler")


@dataclass(slots=True)
class SchedulerResult:
    """One pass: whether this replica led, and the ticks it enqueued (or saw refused)."""

    leader: bool = True
    enqueued: int = 0
    refused: int = 0
    ticks: list[tuple[str, datetime]] = field(default_factory=list)


def ticks_to_make(schedule: ScheduleRow, cron: Cron, now: datetime) -> list[datetime]:
    """The due ticks a pass makes for `schedule`, oldest first."""
    if schedule.catch_up == "all":
        return cron.missed(schedule.next_tick, now, schedule.catch_up_limit)
    since = max(schedule.next_tick, now - timedelta(seconds=ON_TIME_SECONDS))
    on_time = cron.missed(since, now, MAX_ON_TIME_TICKS)
    if on_time or schedule.catch_up == "none":
        return on_time
    return cron.missed(schedule.next_tick, now, 1)


class Scheduler:
    """Enqueues due ticks, every `interval_seconds`."""

    def __init__(self, repo: SchedulesRepository, *, interval_seconds: float) -> None:
        self._repo = repo
        self.interval_seconds = interval_seconds

    async def run_once(self) -> SchedulerResult:
        result = SchedulerResult()
        while True:
            async with self._repo.leading() as leading:
                if leading is None:
                    result.leader = False
                    return result
                due = await leading.due(DUE_BATCH)
                for schedule, now in due:
                    await self._tick(leading, schedule, now, result)
            if len(due) < DUE_BATCH:
                return result

    async def _tick(
        self, leading: SchedulerPass, schedule: ScheduleRow, now: datetime, result: SchedulerResult
    ) -> None:
        cron = Cron(schedule.cron, schedule.timezone, strict=False)
        last = None
        for tick in ticks_to_make(schedule, cron, now):
            job = EnqueueTickParams(
                queue=schedule.queue,
                type=schedule.type,
                payload=json.dumps(schedule.payload),
                priority=schedule.priority,
                max_attempts=schedule.max_attempts,
                lease_seconds=schedule.lease_seconds,
                idempotency_key=f"{TICK_KEY_PREFIX}{schedule.name}:{tick.isoformat()}",
                metadata=json.dumps(
                    {**schedule.metadata, "schedule": schedule.name, "tick": tick.isoformat()}
                ),
            )
            job_id, refused, taken = await leading.enqueue(job)
            if taken:
                event(
                    log,
                    "schedule.key_taken",
                    "schedule %s: another job holds the key of the tick %s; made it without",
                    schedule.name,
                    tick.isoformat(),
                    level=logging.WARNING,
                    schedule=schedule.name,
                    tick=tick.isoformat(),
                )
                job_id, refused, _ = await leading.enqueue(job._replace(idempotency_key=None))
            await leading.record(schedule.name, tick, job_id, refused)
            last = tick
            result.ticks.append((schedule.name, tick))
            if refused is None:
                result.enqueued += 1
            else:
                result.refused += 1
                event(
                    log,
                    "schedule.refused",
                    "schedule %s: the tick %s was refused: %s",
                    schedule.name,
                    tick.isoformat(),
                    refused,
                    level=logging.WARNING,
                    schedule=schedule.name,
                    tick=tick.isoformat(),
                )
        await leading.advance(schedule.name, last, cron.next_after(now))
