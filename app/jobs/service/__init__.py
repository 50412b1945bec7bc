"""The queue core's rules, one module per kind of caller: producers (`enqueue`), workers
(`leases`, `acks`, `handoff`), readers (`reads`) and operators (`admin`). Knows nothing of HTTP."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.config import Settings
from app.jobs.finishes import Finishes
from app.jobs.limits import LimitedQueues
from app.jobs.params import JobFilter
from app.jobs.repository import JobsRepository
from app.jobs.service.acks import Ack, Acks, AttemptError, Finished
from app.jobs.service.admin import JobAdmin
from app.jobs.service.enqueue import Enqueuer
from app.jobs.service.explain import Explanation
from app.jobs.service.handoff import AckAndLease
from app.jobs.service.leases import Heartbeat, Lease, Leased, Leases, Progress, Wanted
from app.jobs.service.reads import Reads
from app.jobs.service.snoozes import Snoozes
from app.jobs.service.specs import ItemRef, JobSpec, Trace, Unique
from app.jobs.wakeups import Wakeups
from app.workers import Presence

__all__ = [
    "Ack",
    "Acks",
    "AttemptError",
    "Explanation",
    "Finished",
    "Heartbeat",
    "ItemRef",
    "JobFilter",
    "JobServices",
    "JobSpec",
    "Lease",
    "Leased",
    "Progress",
    "Trace",
    "Unique",
    "Wanted",
    "enqueue_limits",
]


def enqueue_limits(settings: Settings) -> dict[str, int]:
    """What the SQL enqueue functions apply (`jobq.enqueue_limits`): this service's."""
    return {
        "default_max_attempts": settings.default_max_attempts,
        "default_lease_seconds": settings.default_lease_seconds,
        "max_lease_seconds": settings.max_lease_seconds,
        "max_payload_bytes": settings.max_payload_bytes,
        "max_json_depth": settings.max_json_depth,
        "max_dependency_depth": settings.max_dependency_depth,
        "max_batch_jobs": settings.max_enqueue_batch,
        "max_batch_dependencies": settings.max_batch_dependencies,
    }


@dataclass(frozen=True, slots=True)
class JobServices:
    """Everything the queue core's routes call."""

    enqueue: Enqueuer
    leases: Leases
    acks: Acks
    ack_and_lease: AckAndLease
    snoozes: Snoozes
    reads: Reads
    admin: JobAdmin
    presence: Presence  # the workers that called this replica (`app.workers`)

    @classmethod
    def build(
        cls,
        repo: JobsRepository,
        settings: Settings,
        wakeups: Wakeups,
        finishes: Finishes,
        limited: LimitedQueues,
        presence: Presence,
    ) -> JobServices:
        leases = Leases(repo, settings, wakeups, limited)
        acks = Acks(repo, settings, limited, wakeups)
        return cls(
            enqueue=Enqueuer(repo, settings),
            leases=leases,
            acks=acks,
            ack_and_lease=AckAndLease(acks, leases),
            snoozes=Snoozes(repo, settings, limited),
            reads=Reads(repo, finishes),
            admin=JobAdmin(repo),
            presence=presence,
        )
