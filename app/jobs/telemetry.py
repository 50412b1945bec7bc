"""What the queue core reports about jobs it moved: metrics and events.

Called once per statement with its rows: counters move by `inc(n)` per queue, and
histograms by one increment per bucket touched (`observe_many`), not per row. Events
name jobs by id and queue, never by payload, key or token.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Sequence

from prometheus_client import Counter as Metric

from app.core import metrics
from app.core.logging import event
from app.jobs.rows import FinishedBrief, JobRow

log = logging.getLogger("jobq.jobs")


def _count(counter: Metric, queues: Counter[str]) -> None:
    for queue, n in queues.items():
        metrics.child(counter, queue).inc(n)


def enqueued(queue: str, created: int) -> None:
    """Jobs an enqueue call created (not those it found under their idempotency key)."""
    if created:
        metrics.child(metrics.JOBS_ENQUEUED, queue).inc(created)


def leased(rows: Sequence[JobRow]) -> None:
    """Jobs a lease call handed out; an empty answer is an empty poll."""
    if not rows:
        metrics.EMPTY_LEASES.inc()
        return
    queues: Counter[str] = Counter()
    waits: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        queue = row.queue
        queues[queue] += 1
        leased_at = row.attempted_at
        if leased_at is not None and row.started_at == leased_at:  # its first lease (an
            # operator's retry keeps it)
            waits[queue].append(max((leased_at - row.created_at).total_seconds(), 0))
    _count(metrics.JOBS_LEASED, queues)
    for queue, values in waits.items():
        metrics.observe_many(metrics.child(metrics.WAIT_SECONDS, queue), values)


def finished(rows: Sequence[JobRow | FinishedBrief], outcomes: Sequence[str]) -> None:
    """Leases a finishing call applied: `outcomes[i]` ("complete"/"fail") for `rows[i]`."""
    runs: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row.attempted_at is not None:
            runs[row.queue].append((row.updated_at - row.attempted_at).total_seconds())
    completed = Counter(row.queue for row, o in zip(rows, outcomes, strict=True) if o == "complete")
    if completed.total() < len(rows):  # some failed
        _failed([row for row, o in zip(rows, outcomes, strict=True) if o != "complete"])
    _count(metrics.JOBS_COMPLETED, completed)
    for queue, values in runs.items():
        # a clock stepped back between lease and finish: a run of 0, not less
        metrics.observe_many(metrics.child(metrics.RUN_SECONDS, queue), [max(v, 0) for v in values])


def _failed(rows: Sequence[JobRow | FinishedBrief]) -> None:
    """Failed attempts: retried, or dead (not `cancelled`: its cancellation was asked for)."""
    failed = Counter(row.queue for row in rows)
    retried = Counter(row.queue for row in rows if row.state == "queued")
    dead = [row for row in rows if row.state == "failed"]
    for row in dead:
        error = row.last_error or {}
        dead_job(row.id, row.queue, row.attempt, "failed", error.get("type"))
    _count(metrics.JOBS_FAILED, failed)
    _count(metrics.JOBS_RETRIED, retried)
    _count(metrics.JOBS_DEAD, Counter(row.queue for row in dead))


def dead_job(job_id: int, queue: str, attempt: int, cause: str, error_type: str | None) -> None:
    """A job that ran out of attempts (`cause`: failed, lease_expired)."""
    event(
        log,
        "job.dead",
        "job dead job_id=%d queue=%s attempt=%d cause=%s error_type=%s",
        job_id,
        queue,
        attempt,
        cause,
        error_type,
        level=logging.WARNING,
        job_id=job_id,
        queue=queue,
        attempt=attempt,
        cause=cause,
        error_type=error_type,
    )
