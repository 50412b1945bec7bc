"""The queue core: jobs, leases, acks, and what operators do to one job.

The rest of jobq uses this package through the names below.
"""

from app.jobs import routes
from app.jobs.finishes import Finishes
from app.jobs.limits import LimitedQueues
from app.jobs.payloads import encode as encode_json
from app.jobs.repository import JobsRepository
from app.jobs.schemas import JobState, ProgressOut
from app.jobs.service import (
    Ack,
    Acks,
    AttemptError,
    Finished,
    JobServices,
    Lease,
    Wanted,
    enqueue_limits,
)
from app.jobs.telemetry import dead_job
from app.jobs.views import progress
from app.jobs.wakeups import Wakeups

__all__ = [
    "Ack",
    "Acks",
    "AttemptError",
    "Finished",
    "Finishes",
    "JobServices",
    "JobState",
    "JobsRepository",
    "Lease",
    "LimitedQueues",
    "ProgressOut",
    "Wakeups",
    "Wanted",
    "dead_job",
    "encode_json",
    "enqueue_limits",
    "progress",
    "routes",
]
