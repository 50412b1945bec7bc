"""Retention: finished jobs are deleted, in batches, once older than their state's age.

Succeeded jobs go after `retain_succeeded_seconds` (default a day), failed and
cancelled ones after `retain_failed_seconds` (default a week); 0 keeps them forever.
Runs under the same advisory lock as the reaper, so one replica prunes at a time.

A pass deletes `batch_size` jobs per statement and rests `pause_seconds` between two
batches, so that a day of history to delete is a steady trickle beside the hot path
rather than a burst of writes (WAL, dead rows, I/O) that slows every lease while it
lasts. A batch that fails (a row a trigger or a constraint refuses) does not stop the
pass: its jobs are deleted one at a time, each failure logged with the job
(`pruner.job_failed`) and left out of the rest of the pass, as the reaper does. A batch
that finds the maintenance lock taken (the reaper, the statistics or the vacuum of this
replica or another hold it for a while) ends a pass under way only when the lock stays
taken for `REFUSED_FOR_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass

import asyncpg

from app.core.logging import event
from app.jobs import JobState
from app.maintenance.repository import MaintenanceRepository
from app.maintenance.rows import LeaderBatch

log = logging.getLogger("jobq.pruner")

REFUSED_FOR_SECONDS = 10.0  # a pass under way ends when the lock stays taken this long
REFUSED_REST_SECONDS = 0.05  # ... asking again after at least this rest


@dataclass(slots=True)
class PruneResult:
    """One pass: whether this replica was the leader, and how many jobs it deleted."""

    leader: bool = True
    succeeded: int = 0
    failed: int = 0  # failed and cancelled
    refused: int = 0  # jobs a delete failed for, left for the next pass

    @property
    def pruned(self) -> int:
        return self.succeeded + self.failed


class Pruner:
    """Deletes finished jobs past retention, every `interval_seconds`."""

    def __init__(
        self,
        repo: MaintenanceRepository,
        *,
        retain_succeeded_seconds: float,
        retain_failed_seconds: float,
        interval_seconds: float,
        batch_size: int,
        pause_seconds: float = 0.0,
    ) -> None:
        self._repo = repo
        self._succeeded_age = retain_succeeded_seconds or None  # 0: keep forever
        self._failed_age = retain_failed_seconds or None
        self.interval_seconds = interval_seconds
        self.batch_size = batch_size
        self.pause_seconds = pause_seconds

    async def run_once(self) -> PruneResult:
        """Delete every finished job past retention, a batch at a time."""
        result = PruneResult()
        if self._succeeded_age is None and self._failed_age is None:
            return result
        failed: list[int] = []  # jobs this pass could not delete: left out from then on
        refused_since: float | None = None  # when batches began to find the lock taken
        while True:
            try:
                batch = await self._repo.prune_batch(
                    self.batch_size, self._succeeded_age, self._failed_age, failed
                )
            except asyncpg.PostgresError:
                more = await self._prune_one_at_a_time(result, failed)
            else:
                more = None if batch is None else self._record(batch, result)
            if more is None:
                # Another replica leads, or the reaper, the statistics or the vacuum
                # hold the lock for a while: a pass under way tries again after a rest.
                now = time.monotonic()
                refused_since = refused_since or now
                if not result.pruned or now - refused_since > REFUSED_FOR_SECONDS:
                    result.leader = False
                    break
            elif not more:
                break
            else:
                refused_since = None
            rest = REFUSED_REST_SECONDS if refused_since else 0.0
            await asyncio.sleep(max(self.pause_seconds, rest))
        result.refused = len(failed)
        if result.pruned:
            log.info("pruned %d succeeded and %d failed jobs", result.succeeded, result.failed)
        return result

    def _record(self, batch: LeaderBatch[JobState], result: PruneResult) -> bool:
        """Count one batch into `result`; whether more may be left (it was full)."""
        states = Counter(batch.rows)
        result.succeeded += states["succeeded"]
        result.failed += states["failed"] + states["cancelled"]
        return len(batch.rows) == self.batch_size

    async def _prune_one_at_a_time(self, result: PruneResult, failed: list[int]) -> bool | None:
        """Delete the next batch's jobs one by one, adding those that fail to `failed`;
        whether more may be left (None: another replica is maintaining)."""
        ages = (self._succeeded_age, self._failed_age)
        job_ids = await self._repo.finished_past_retention(self.batch_size, *ages, failed)
        for job_id in job_ids:
            try:
                batch = await self._repo.prune_batch(1, *ages, failed, only=job_id)
            except asyncpg.PostgresError as error:
                failed.append(job_id)
                event(
                    log,
                    "pruner.job_failed",
                    "could not prune job_id=%d: %s",
                    job_id,
                    error,
                    level=logging.ERROR,
                    job_id=job_id,
                    error=str(error),
                )
                continue
            if batch is None:
                return None
            self._record(batch, result)
        return len(job_ids) == self.batch_size
