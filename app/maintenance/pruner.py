"""Retention: finished jobs are deleted, in batches, once older than their state's age.

Succeeded jobs go after `retain_succeeded_seconds` (default a day), failed and
cancelled ones after `retain_failed_seconds` (default a week); 0 keeps them forever.
Runs under the same advisory lock as the reaper, so one replica prunes at a time.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from app.maintenance.repository import MaintenanceRepository

log = logging.getLogger("jobq.pruner")


@dataclass(slots=True)
class PruneResult:
    """One pass: whether this replica was the leader, and how many jobs it deleted."""

    leader: bool = True
    succeeded: int = 0
    failed: int = 0  # failed and cancelled

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
    ) -> None:
        self._repo = repo
        self._succeeded_age = retain_succeeded_seconds or None  # 0: keep forever
        self._failed_age = retain_failed_seconds or None
        self.interval_seconds = interval_seconds
        self.batch_size = batch_size

    async def run_once(self) -> PruneResult:
        """Delete every finished job past retention, a batch at a time."""
        result = PruneResult()
        if self._succeeded_age is None and self._failed_age is None:
            return result
        while True:
            batch = await self._repo.prune_batch(
                self.batch_size, self._succeeded_age, self._failed_age
            )
            if batch is None:
                result.leader = False
                break
            states = Counter(batch.rows)
            result.succeeded += states["succeeded"]
            result.failed += states["failed"] + states["cancelled"]
            if len(batch.rows) < self.batch_size:
                break
        if result.pruned:
            log.info("pruned %d succeeded and %d failed jobs", result.succeeded, result.failed)
        return result
