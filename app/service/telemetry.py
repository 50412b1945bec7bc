"""What the job service and the reaper report about outcomes: metrics and events.

Called once per statement with its rows: counters move by `inc(n)` per queue, and
histograms by one increment per bucket touched (`observe_many`), not per row. Events
name jobs by id and queue, never by payload, key or token.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from prometheus_client import Counter as Metric

from app.core import metrics
from app.core.logging import event
from app.db.repository import Row

log = logging.getLogger("jobq.jobs")


def _count(counter: Metric, queues: Counter[str]) -> None:
    for queue, n in queues.items():
        counter.labels(queue).inc(n)


def enqueued(queue: str, rows: Iterable[Row]) -> None:
    """Jobs an enqueue call created (rows with `deduplicated`)."""
    created = sum(1 for row in rows if not row["deduplicated"])
    if created:
        metrics.JOBS_ENQUEUED.labels(queue).inc(created)


def leased(rows: Sequence[Row]) -> None:
    """Jobs a lease call handed out; an empty answer is an empty poll."""
    if not rows:
        metrics.EMPTY_LEASES.inc()
        return
    queues: Counter[str] = Counter()
    waits: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        queue = row["queue"]
        queues[queue] += 1
        leased_at = row["attempted_at"]
        if row["started_at"] == leased_at:  # its first lease (an operator's retry keeps it)
            waits[queue].append(max((leased_at - row["created_at"]).total_seconds(), 0))
    _count(metrics.JOBS_LEASED, queues)
    for queue, values in waits.items():
        metrics.observe_many(metrics.WAIT_SECONDS.labels(queue), values)


def finished(rows: Sequence[Row], outcomes: Sequence[str]) -> None:
    """Leases a finishing call applied: `outcomes[i]` ("complete"/"fail") for `rows[i]`."""
    completed: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    retried: Counter[str] = Counter()
    dead: Counter[str] = Counter()
    runs: dict[str, list[float]] = defaultdict(list)
    for row, outcome in zip(rows, outcomes, strict=True):
        queue = row["queue"]
        runs[queue].append(max((row["updated_at"] - row["attempted_at"]).total_seconds(), 0))
        if outcome == "complete":
            completed[queue] += 1
            continue
        failed[queue] += 1
        if row["state"] == "queued":
            retried[queue] += 1
        elif row["state"] == "failed":  # not `cancelled`: its cancellation was asked for
            dead[queue] += 1
            error = row["last_error"] or {}
            _dead(row, "failed", error.get("type"))
    _count(metrics.JOBS_COMPLETED, completed)
    _count(metrics.JOBS_FAILED, failed)
    _count(metrics.JOBS_RETRIED, retried)
    _count(metrics.JOBS_DEAD, dead)
    for queue, values in runs.items():
        metrics.observe_many(metrics.RUN_SECONDS.labels(queue), values)


def reaped(rows: Sequence[Row]) -> None:
    """Jobs whose lease the reaper took back: queued again, or dead."""
    expired: Counter[str] = Counter()
    retried: Counter[str] = Counter()
    dead: Counter[str] = Counter()
    for row in rows:
        queue = row["queue"]
        expired[queue] += 1
        event(
            log,
            "lease.expired",
            "lease expired job_id=%d queue=%s attempt=%d now=%s",
            row["id"],
            queue,
            row["attempt"],
            row["state"],
            job_id=row["id"],
            queue=queue,
            attempt=row["attempt"],
            state=row["state"],
        )
        if row["state"] == "queued":
            retried[queue] += 1
        elif row["state"] == "failed":
            dead[queue] += 1
            _dead(row, "lease_expired", "lease_expired")
    metrics.REAPER_REAPED.inc(len(rows))
    _count(metrics.JOBS_LEASE_EXPIRED, expired)
    _count(metrics.JOBS_RETRIED, retried)
    _count(metrics.JOBS_DEAD, dead)


def _dead(row: Row, cause: str, error_type: str | None) -> None:
    event(
        log,
        "job.dead",
        "job dead job_id=%d queue=%s attempt=%d cause=%s error_type=%s",
        row["id"],
        row["queue"],
        row["attempt"],
        cause,
        error_type,
        level=logging.WARNING,
        job_id=row["id"],
        queue=row["queue"],
        attempt=row["attempt"],
        cause=cause,
        error_type=error_type,
    )
