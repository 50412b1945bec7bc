"""Prometheus metrics counted by this process, and the exposition of `/metrics`.

Counters and histograms are incremented by the service layer where outcomes are
known (once per batch where it can). They count what *this process* did. With
`jobq serve --workers N` the processes share one port, so a scrape lands on any of
them: `jobq serve` then gives every worker one `PROMETHEUS_MULTIPROC_DIR` and each
scrape adds up all the workers' files (prometheus-client's multiprocess mode), so
counters never jump between processes. Gauges read from SQL (jobs by state, queue
age, table health) are the same from any process; `/metrics` adds them from a cached
snapshot (see `app.queues.service.stats`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar, cast

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# prometheus-client picks its value store when imported: decide with it, once.
MULTIPROCESS = MULTIPROC_ENV in os.environ
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Seconds: from a few milliseconds (a waiting worker) to an hour (a backlog).
JOB_SECONDS_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600,
)  # fmt: skip
HTTP_SECONDS_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
)  # fmt: skip

disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series: they double the output for nothing

JOBS_ENQUEUED = Counter(
    "jobq_jobs_enqueued", "Jobs created by enqueue calls (not deduplicated ones).", ["queue"]
)
JOBS_LEASED = Counter("jobq_jobs_leased", "Jobs handed to workers (every attempt).", ["queue"])
JOBS_COMPLETED = Counter("jobq_jobs_completed", "Leases completed: the job succeeded.", ["queue"])
JOBS_FAILED = Counter("jobq_jobs_failed", "Attempts failed by their worker.", ["queue"])
JOBS_RETRIED = Counter(
    "jobq_jobs_retried",
    "Attempts that ended (failed, or lease expired) with the job queued again.",
    ["queue"],
)
JOBS_LEASE_EXPIRED = Counter(
    "jobq_jobs_lease_expired", "Leases the reaper took back because they expired.", ["queue"]
)
JOBS_EXPIRED = Counter(
    "jobq_jobs_expired",
    "Jobs not leased by their start_by deadline: cancelled as `expired`.",
    ["queue"],
)
JOBS_DEAD = Counter(
    "jobq_jobs_dead",
    "Jobs that ended `failed` for good (no attempt left, or not retryable).",
    ["queue"],
)
WAIT_SECONDS = Histogram(
    "jobq_job_wait_seconds",
    "From enqueue to the job's first lease.",
    ["queue"],
    buckets=JOB_SECONDS_BUCKETS,
)
RUN_SECONDS = Histogram(
    "jobq_job_run_seconds",
    "How long an attempt ran: from its lease to its worker's complete or fail.",
    ["queue"],
    buckets=JOB_SECONDS_BUCKETS,
)
EMPTY_LEASES = Counter(
    "jobq_lease_empty_polls", "Lease calls answered with no job (after any long-poll wait)."
)
ANNOUNCEMENTS_DROPPED = Counter(
    "jobq_announcements_dropped",
    "Announcements (NOTIFY) ignored as malformed (any database role may send them).",
    ["channel"],
)
REAPER_LAST_RUN = Gauge(
    "jobq_reaper_last_run_timestamp_seconds",
    "When this process's reaper last finished a pass (Unix time).",
    multiprocess_mode="livemax",
)
REAPER_REAPED = Counter("jobq_reaper_jobs_reaped", "Expired leases the reaper handled.")
AUDIT_LOST = Counter(
    "jobq_audit_lost", "Audit entries that could not be written (logged as audit.lost instead)."
)
HTTP_DURATION = Histogram(
    "jobq_http_request_duration_seconds",
    "HTTP requests by route template, method and status.",
    ["route", "method", "status"],
    buckets=HTTP_SECONDS_BUCKETS,
)
POOL_IN_USE = Gauge(
    "jobq_db_pool_connections_in_use",
    "Database connections checked out of the pool.",
    multiprocess_mode="livesum",
)


M = TypeVar("M", Counter, Histogram)
_children: dict[tuple[object, ...], Any] = {}


def child(metric: M, *values: str) -> M:
    """`metric.labels(*values)`, remembered: prometheus-client checks the values and
    takes a lock on every `labels` call (four calls per single-job request)."""
    key = (metric, *values)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*values)
    return cast(M, found)


def observe_many(histogram: Histogram, values: Sequence[float]) -> None:
    """`histogram.observe(v)` for each value of a batch (a lease's waits, an ack's runs)."""
    for v in values:
        histogram.observe(v)


POOL_SAMPLE_SECONDS = 1.0


def sample_pool(engine: AsyncEngine) -> None:
    """Set `jobq_db_pool_connections_in_use` from the engine's pool, now."""
    pool = engine.sync_engine.pool
    if isinstance(pool, QueuePool):
        POOL_IN_USE.set(pool.checkedout())


async def sample_pool_every(engine: AsyncEngine, seconds: float = POOL_SAMPLE_SECONDS) -> None:
    """Keep this process's `jobq_db_pool_connections_in_use` current: sampled every
    `seconds` (and by each scrape this process answers), not counted at every checkout
    and checkin: listeners on those events would run twice in every request (with
    `jobq serve --workers N`, each one a write to the process's metrics file)."""
    while True:
        sample_pool(engine)
        await asyncio.sleep(seconds)


class _Families:
    """A collector made of other collectors' families and extra ones."""

    def __init__(self, sources: Iterable[object], extra: Iterable[Metric]) -> None:
        self._sources = sources
        self._extra = extra

    def collect(self) -> Iterator[Metric]:
        for source in self._sources:
            yield from source.collect()  # type: ignore[attr-defined]
        yield from self._extra


def render(extra: Iterable[Metric]) -> bytes:
    """The exposition: this process's (or all workers') metrics, then `extra` families."""
    if MULTIPROCESS:
        workers = CollectorRegistry()
        MultiProcessCollector(workers)  # type: ignore[no-untyped-call]
        sources: list[object] = [workers]
    else:
        sources = [REGISTRY]  # jobq's metrics, and the process's CPU, memory and GC
    return generate_latest(_Families(sources, extra))


def process_exited() -> None:
    """Forget this process's live gauges (multiprocess mode); its counters still count."""
    if MULTIPROCESS:
        mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
