"""The queue core's rules, one module per kind of caller: producers (`enqueue`), workers
(`leases`, `acks`), readers (`reads`) and operators (`admin`). Knows nothing of HTTP."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.config import Settings
from app.jobs.repository import JobsRepository
from app.jobs.service.acks import Acks, Finished
from app.jobs.service.admin import JobAdmin
from app.jobs.service.enqueue import Enqueuer
from app.jobs.service.leases import Heartbeat, Lease, Leases
from app.jobs.service.reads import Reads
from app.jobs.wakeups import Wakeups

__all__ = ["Finished", "Heartbeat", "JobServices", "Lease"]


@dataclass(frozen=True, slots=True)
class JobServices:
    """Everything the queue core's routes call."""

    enqueue: Enqueuer
    leases: Leases
    acks: Acks
    reads: Reads
    admin: JobAdmin

    @classmethod
    def build(cls, repo: JobsRepository, settings: Settings, wakeups: Wakeups) -> JobServices:
        return cls(
            enqueue=Enqueuer(repo, settings),
            leases=Leases(repo, settings, wakeups),
            acks=Acks(repo, settings),
            reads=Reads(repo),
            admin=JobAdmin(repo),
        )
