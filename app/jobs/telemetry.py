"""What the queue core reports about jobs it moved: metrics and events.

Called once per statement with its rows: counters move by `inc(n)` per queue, and
histograms by one increment per bucket touched (`observe_many`), not per row. Events
name jobs by id and queue, never by payload, key or token.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta
from operator import attrgetter, sub
from typing import Any

from prometheus_client import Counter as Metric
from prometheus_client import Histogram

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
    queues = Counter(map(_QUEUE, rows))
    _count(metrics.JOBS_LEASED, queues)
    # the wait of each job on its first lease (an operator's retry keeps started_at)
    first = [row for row in rows if row.started_at == row.attempted_at]
    _observe(metrics.WAIT_SECONDS, first, _ATTEMPTED, _CREATED, queues)


def finished(rows: Sequence[JobRow | FinishedBrief], outcomes: Sequence[str]) -> None:
    """Leases a finishing call applied: `outcomes[i]` ("complete"/"fail") for `rows[i]`."""
    queues = Counter(map(_QUEUE, rows))
    if outcomes.count("complete") == len(rows):  # most calls
        completed = queues
    else:
        completed = Counter(
            row.queue for row, o in zip(rows, outcomes, strict=True) if o == "complete"
        )
        _failed([row for row, o in zip(rows, outcomes, strict=True) if o != "complete"])
    _count(metrics.JOBS_COMPLETED, completed)
    _observe(metrics.RUN_SECONDS, rows, _UPDATED, _ATTEMPTED, queues)


_QUEUE = attrgetter("queue")
_CREATED = attrgetter("created_at")
_ATTEMPTED = attrgetter("attempted_at")
_UPDATED = attrgetter("updated_at")
_ZERO = timedelta(0)


def _observe(
    histogram: Histogram,
    rows: Sequence[JobRow | FinishedBrief],
    end: Callable[[Any], datetime | None],
    start: Callable[[Any], datetime | None],
    queues: Collection[str],
) -> None:
    """Each row's `end - start` in `histogram`, labelled by its queue, one of `queues` (a
    clock stepped back between the two: 0, not less). Rows without both times are left
    out."""
    if len(queues) > 1:  # one observation per queue, of that queue's rows
        by_queue: dict[str, list[JobRow | FinishedBrief]] = defaultdict(list)
        for row in rows:
            by_queue[row.queue].append(row)
        for queue, of_queue in by_queue.items():
            _observe(histogram, of_queue, end, start, (queue,))
        return
    ends, starts = list(map(end, rows)), list(map(start, rows))
    if None in ends or None in starts:
        pairs = [
            (e, s) for e, s in zip(ends, starts, strict=True) if e is not None and s is not None
        ]
        ends, starts = [e for e, _ in pairs], [s for _, s in pairs]
    if not ends:
        return
    spans = list(map(sub, ends, starts))  # in C, a row at a time
    if min(spans) < _ZERO:
        spans = [max(span, _ZERO) for span in spans]
    (queue,) = queues
    seconds = list(map(timedelta.total_seconds, spans))
    metrics.observe_many(metrics.child(histogram, queue), seconds)


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
