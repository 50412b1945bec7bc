"""Maintenance: what the elected leader does on its own (the reaper, retention, vacuum
where autovacuum is off, the statistics' upkeep).

Each service does one pass in `run_once()`; `run_periodically` repeats it.
"""

from app.db.leader import MAINTENANCE_LOCK_KEY
from app.maintenance.loop import run_periodically
from app.maintenance.pruner import Pruner, PruneResult
from app.maintenance.reaper import Reaper, ReapResult
from app.maintenance.repository import MaintenanceRepository
from app.maintenance.statistics import FoldResult, StatisticsKeeper
from app.maintenance.vacuum import Vacuumer, VacuumResult

__all__ = [
    "MAINTENANCE_LOCK_KEY",
    "FoldResult",
    "MaintenanceRepository",
    "PruneResult",
    "Pruner",
    "ReapResult",
    "Reaper",
    "StatisticsKeeper",
    "VacuumResult",
    "Vacuumer",
    "run_periodically",
]
