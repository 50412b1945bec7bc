"""Cron schedules: what to enqueue and when, and the scheduler that enqueues each due tick
exactly once. The rest of jobq uses this package through the names below."""

from app.schedules.repository import SchedulesRepository
from app.schedules.routes import router
from app.schedules.scheduler import Scheduler, SchedulerResult
from app.schedules.service import Schedules

__all__ = ["Scheduler", "SchedulerResult", "Schedules", "SchedulesRepository", "router"]
