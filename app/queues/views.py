"""Queues as the API shows them: each response shaped here, from typed rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.jobs import progress
from app.push import PushDeliveries, PushTarget, deliveries_view, target_view
from app.queues.rows import (
    DatabaseHealth,
    QueueActivity,
    QueueFigures,
    QueueLimits,
    QueueOverview,
    QueueSettingsRow,
    QueueState,
    RunningJob,
)
from app.queues.service.stats import QueueReport, QueuesReport


def state(row: QueueState) -> dict[str, Any]:
    """`QueueStateOut`."""
    return {"queue": row.name, "paused": row.paused, "paused_at": row.paused_at}


def settings(current: QueueSettingsRow, target: PushTarget | None = None) -> dict[str, Any]:
    """`QueueSettingsOut`."""
    return {
        "queue": current.name,
        "max_backlog": current.max_backlog,
        "max_running": current.max_running,
        "max_running_per_key": current.max_running_per_key,
        "rate_limit": _rate(current.rate_limit_jobs, current.rate_limit_seconds),
        "max_attempts": current.max_attempts,
        "lease_seconds": current.lease_seconds,
        "backoff_base_seconds": current.backoff_base_seconds,
        "backoff_cap_seconds": current.backoff_cap_seconds,
        "backoff_jitter": current.backoff_jitter,
        "retain_succeeded_seconds": current.retain_succeeded_seconds,
        "retain_failed_seconds": current.retain_failed_seconds,
        "ordering": current.ordering,
        "fair_weights": current.fair_weights,
        "rate_limit_per_key": _rate(
            current.rate_limit_per_key_jobs, current.rate_limit_per_key_seconds
        ),
        "aging": None
        if current.aging_seconds is None
        else {"per_seconds": current.aging_seconds, "max_boost": current.aging_max},
        "push": target_view(target),
        "timeout_seconds": current.timeout_seconds,
    }


def _rate(jobs: int | None, seconds: float | None) -> dict[str, Any] | None:
    return None if jobs is None else {"jobs": jobs, "per_seconds": seconds}


def _percentiles(values: list[float] | None) -> dict[str, float | None]:
    p50, p95 = values if values is not None else (None, None)
    return {"p50": p50, "p95": p95}


def _running(job: RunningJob) -> dict[str, Any]:
    return {
        "id": job.id,
        "type": job.type,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "worker_id": job.worker_id,
        "started_at": job.attempted_at,
        "lease_expires_at": job.lease_expires_at,
        "cancel_requested": job.cancel_requested,
        "progress": progress(job),
    }


def _nothing_yet(queue: str) -> QueueFigures:
    """The figures of a queue no job names: all zero."""
    return QueueFigures(
        QueueOverview(queue, 0, 0, 0, 0, 0, 0, None, False, None),
        QueueActivity(0, 0, 0, 0, 0, 0, None, None),
    )


def queue(report: QueueReport) -> dict[str, Any]:
    """`QueueStats`; a queue with no figures has them all at zero."""
    o, a = report.figures or _nothing_yet(report.queue)
    return {
        "queue": report.queue,
        "paused": o.paused,
        "paused_at": o.paused_at,
        "counts": {
            "queued": o.queued,
            "due": o.due,
            "running": o.running,
            "waiting": o.waiting,
            "failed": o.failed,
            "cancelled": o.cancelled,
        },
        "oldest_due_age_seconds": o.oldest_due_age_seconds,
        "last_minute": {
            "enqueued": a.enqueued_1m,
            "succeeded": a.succeeded_1m,
            "failed": a.failed_1m,
        },
        "last_hour": {
            "enqueued": a.enqueued_1h,
            "succeeded": a.succeeded_1h,
            "failed": a.failed_1h,
            "wait_seconds": _percentiles(a.wait_seconds),
            "run_seconds": _percentiles(a.run_seconds),
        },
        "limits": None if report.limits is None else limits(report.limits),
        "running_jobs": [_running(job) for job in report.running],
    }


def queue_detail(report: QueueReport, push: PushDeliveries | None) -> dict[str, Any]:
    """`QueueDetail`: `QueueStats`, whether the queue is known, its unserved types, and a
    pushed queue's deliveries."""
    return {
        **queue(report),
        "known": report.known,
        "unserved_types": [row._asdict() for row in report.unserved],
        "fair_keys": [row._asdict() for row in report.fair_keys],
        "push": deliveries_view(push),
    }


def limits(row: QueueLimits) -> dict[str, Any]:
    """`QueueLimitsOut`."""
    rate = None
    if row.rate_limit_jobs is not None:
        rate = {
            "jobs": row.rate_limit_jobs,
            "per_seconds": row.rate_limit_seconds,
            "used": row.rate_used,
        }
    return {
        "max_running": row.max_running,
        "max_running_per_key": row.max_running_per_key,
        "rate_limit": rate,
        "throttled": row.throttled(),
    }


def database(row: DatabaseHealth) -> dict[str, Any]:
    """`DatabaseHealth`, as the API names its fields."""
    return {
        "jobs_live_tuples": row.live_tuples,
        "jobs_dead_tuples": row.dead_tuples,
        "jobs_last_autovacuum": row.last_autovacuum,
        "jobs_last_vacuum": row.last_vacuum,
        "oldest_transaction_age_seconds": row.oldest_transaction_age_seconds,
        "oldest_xmin_age": row.oldest_xmin_age,
        "reaper_last_pass": row.reaper_last_pass,
    }


def queues(report: QueuesReport, visible: Callable[[str], bool]) -> dict[str, Any]:
    """`QueuesStats`, of the queues `visible` keeps (those a key may read)."""
    shown = [q for q in report.queues if visible(q.queue)]
    return {"queues": [queue(q) for q in shown], "database": database(report.database)}
