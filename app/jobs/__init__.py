"""The queue core: jobs, leases, acks, and what operators do to one job.

The rest of jobq uses this package through the names below.
"""

from app.jobs import routes
from app.jobs.repository import JobsRepository
from app.jobs.schemas import ProgressOut
from app.jobs.service import JobServices
from app.jobs.telemetry import dead_job
from app.jobs.views import progress
from app.jobs.wakeups import Wakeups

__all__ = [
    "JobServices",
    "JobsRepository",
    "ProgressOut",
    "Wakeups",
    "dead_job",
    "progress",
    "routes",
]
