"""Vacuum where autovacuum will not: a safety net for servers that turned it off.

Every lease, finish and retention delete leaves a dead row behind; autovacuum clears
them. With autovacuum off (on the server, or for one of jobq's tables) they pile up:
the jobs table and its indexes grow without end and leasing slows. Then the maintenance
leader runs `VACUUM (ANALYZE)` on each of jobq's tables whose dead rows pass a
threshold, and says once that it does. Where autovacuum runs it does nothing.

The leader decides under the maintenance lock; the VACUUM itself cannot run inside a
transaction, so it runs after, on its own. A replica that takes the lead meanwhile may
decide the same: its VACUUM waits for the first and finds little left to do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from app.maintenance.repository import MaintenanceRepository

log = logging.getLogger("jobq.vacuum")
MIN_DEAD_ROWS = 1000
DEAD_FRACTION = 0.05  # of the live rows: autovacuum's own default is 0.2


@dataclass(slots=True)
class VacuumResult:
    """One pass: whether this replica was the leader, and the tables it vacuumed."""

    leader: bool = True
    tables: list[str] = field(default_factory=list)


class Vacuumer:
    """Vacuums jobq's tables that autovacuum leaves alone, every `interval_seconds`."""

    def __init__(
        self,
        repo: MaintenanceRepository,
        *,
        interval_seconds: float,
        min_dead: int = MIN_DEAD_ROWS,
        fraction: float = DEAD_FRACTION,
    ) -> None:
        self._repo = repo
        self.interval_seconds = interval_seconds
        self._min_dead = min_dead
        self._fraction = fraction
        self._warned: set[str] = set()

    async def run_once(self) -> VacuumResult:
        """Vacuum each table past the threshold, most dead rows first."""
        found = await self._repo.tables_to_vacuum(self._min_dead, self._fraction)
        if found is None:
            return VacuumResult(leader=False)
        result = VacuumResult()
        for table in found.rows:
            if table.name not in self._warned:
                self._warned.add(table.name)
                log.warning(
                    "autovacuum does not clean %s on this server: jobq vacuums it itself "
                    "(turn autovacuum on, or see JOBQ_VACUUM_INTERVAL_SECONDS)",
                    table.name,
                )
            await self._repo.vacuum(table.name)
            log.info("vacuumed %s (%d dead rows)", table.name, table.dead)
            result.tables.append(table.name)
        return result
