"""What the reaper reports about the jobs it moved: metrics and events."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

from app.core import metrics
from app.core.logging import event
from app.jobs import dead_job
from app.maintenance.rows import Expired, Reaped

log = logging.getLogger("jobq.jobs")


def reaped(rows: Sequence[Reaped]) -> None:
    """Jobs whose lease the reaper took back: queued again, or dead."""
    expired: Counter[str] = Counter()
    retried: Counter[str] = Counter()
    dead: Counter[str] = Counter()
    for row in rows:
        expired[row.queue] += 1
        event(
            log,
            "lease.expired",
            "lease expired job_id=%d queue=%s attempt=%d now=%s",
            row.id,
            row.queue,
            row.attempt,
            row.state,
            job_id=row.id,
            queue=row.queue,
            attempt=row.attempt,
            state=row.state,
        )
        if row.state == "queued":
            retried[row.queue] += 1
        elif row.state == "failed":
            dead[row.queue] += 1
            dead_job(row.id, row.queue, row.attempt, "lease_expired", "lease_expired")
    metrics.REAPER_REAPED.inc(len(rows))
    for counter, queues in (
        (metrics.JOBS_LEASE_EXPIRED, expired),
        (metrics.JOBS_RETRIED, retried),
        (metrics.JOBS_DEAD, dead),
    ):
        for queue, n in queues.items():
            metrics.child(counter, queue).inc(n)


def expired(rows: Sequence[Expired]) -> None:
    """Jobs not leased by their start deadline, cancelled by the reaper's pass."""
    queues = Counter(row.queue for row in rows)
    for row in rows:
        event(
            log,
            "job.expired",
            "job expired before it started job_id=%d queue=%s",
            row.id,
            row.queue,
            job_id=row.id,
            queue=row.queue,
        )
    for queue, n in queues.items():
        metrics.child(metrics.JOBS_EXPIRED, queue).inc(n)
