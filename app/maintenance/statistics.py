"""The statistics' upkeep: deltas folded into the totals, old rollups deleted.

Every statement on the jobs table appends what it changed in the statistics to
`jobq.job_stat_deltas` (migration 0025), so that no enqueue, lease or finish waits on a
shared counter row. Reads add the deltas not folded yet to the totals: this pass keeps
them few, folding them a slice at a time into `jobq.job_counts`, `jobq.queue_minutes`
and `jobq.failed_group_counts` (migration 0043), forgets the failed groups down to no
job, then deletes the minutes older than the retention. On the
maintenance leader only, like the reaper. The push deliveries' per-minute statistics
(`jobq.push_minutes`) are deleted with the same retention.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from app.maintenance.repository import MaintenanceRepository

log = logging.getLogger("jobq.statistics")
MAX_SLICES_PER_PASS = 20  # a pass stays short; the next one goes on


@dataclass(slots=True)
class FoldResult:
    """One pass: whether this replica was the leader, the deltas folded and the
    per-minute rollups (the queues' and the push deliveries') deleted past retention."""

    leader: bool = True
    folded: int = 0
    pruned: int = 0


class StatisticsKeeper:
    """Folds the statistics' deltas and prunes old rollups, every `interval_seconds`."""

    def __init__(
        self,
        repo: MaintenanceRepository,
        *,
        interval_seconds: float,
        batch_size: int,
        retention_days: float,
    ) -> None:
        self._repo = repo
        self.interval_seconds = interval_seconds
        self.batch_size = batch_size
        self._retain_seconds = retention_days * 86_400.0

    async def run_once(self) -> FoldResult:
        """Fold the deltas (up to MAX_SLICES_PER_PASS slices), then prune a batch of old
        rollups."""
        result = FoldResult()
        for _ in range(MAX_SLICES_PER_PASS):
            folded = await self._repo.fold_stat_deltas(self.batch_size)
            if folded is None:
                result.leader = False
                return result
            result.folded += folded
            if folded < self.batch_size:
                break
        if await self._repo.forget_empty_failed_groups() is None:
            result.leader = False
            return result
        pruned = await self._repo.prune_queue_minutes(self.batch_size, self._retain_seconds)
        if pruned is None:
            result.leader = False
            return result
        pushed = await self._repo.prune_push_minutes(self.batch_size, self._retain_seconds)
        if pushed is None:
            result.leader = False
            return result
        pruned += pushed
        result.pruned = pruned
        if pruned:
            log.info("deleted %d per-minute rollups past retention", pruned)
        return result
