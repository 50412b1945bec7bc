"""The Prometheus gauges read from SQL: jobs by queue and state, the database's health."""

from __future__ import annotations

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from app.queues.service import Snapshot


def _limits(snapshot: Snapshot) -> list[Metric]:
    """The limited queues' limits, their use, and the jobs each limit holds back."""
    max_running = GaugeMetricFamily(
        "jobq_queue_max_running", "The queue's max_running limit.", labels=["queue"]
    )
    rate_limit = GaugeMetricFamily(
        "jobq_queue_rate_limit_jobs",
        "Leases the queue's rate limit allows per window.",
        labels=["queue"],
    )
    rate_used = GaugeMetricFamily(
        "jobq_queue_rate_limit_used", "Leases in the rate window ending now.", labels=["queue"]
    )
    throttled = GaugeMetricFamily(
        "jobq_queue_throttled_jobs",
        "Due jobs a limit holds back (limit: max_running, max_running_per_key, rate_limit).",
        labels=["queue", "limit"],
    )
    for row in snapshot.limits:
        if row.max_running is not None:
            max_running.add_metric([row.queue], row.max_running)
        if row.rate_limit_jobs is not None:
            rate_limit.add_metric([row.queue], row.rate_limit_jobs)
            rate_used.add_metric([row.queue], row.rate_used)
        for limit, held in row.throttled().items():
            throttled.add_metric([row.queue, limit], held)
    return [max_running, rate_limit, rate_used, throttled]


def families(snapshot: Snapshot) -> list[Metric]:
    """The gauges read from SQL, from a (cached) snapshot."""
    up = GaugeMetricFamily(
        "jobq_database_up",
        "1 when the last read of the queue statistics succeeded, else 0.",
        value=1 if snapshot.ok else 0,
    )
    if not snapshot.ok:
        return [up]
    jobs = GaugeMetricFamily(
        "jobq_jobs",
        "Jobs by queue and state; succeeded jobs are not counted (see jobq_jobs_completed).",
        labels=["queue", "state"],
    )
    oldest = GaugeMetricFamily(
        "jobq_oldest_queued_age_seconds",
        "How long the oldest due queued job has been due (0 when none is).",
        labels=["queue"],
    )
    paused = GaugeMetricFamily("jobq_queue_paused", "1 when the queue is paused.", labels=["queue"])
    for row in snapshot.queues:
        queue = row.queue
        for state, count in (
            ("queued", row.queued),
            ("running", row.running),
            ("waiting", row.waiting),
            ("failed", row.failed),
            ("cancelled", row.cancelled),
        ):
            jobs.add_metric([queue, state], count)
        oldest.add_metric([queue], row.oldest_due_age_seconds or 0.0)
        paused.add_metric([queue], 1 if row.paused else 0)
    result: list[Metric] = [up, jobs, oldest, paused, *_limits(snapshot)]
    health = snapshot.database
    if health is not None:
        dead = GaugeMetricFamily(
            "jobq_jobs_table_dead_tuples", "Dead row versions in the jobs table, not yet vacuumed."
        )
        vacuumed = GaugeMetricFamily(
            "jobq_jobs_table_last_autovacuum_timestamp_seconds",
            "When autovacuum last finished on the jobs table (Unix time; 0 if never).",
        )
        transaction = GaugeMetricFamily(
            "jobq_oldest_transaction_age_seconds",
            "Age of the oldest open transaction holding a snapshot in the database (0 if none).",
        )
        xmin = GaugeMetricFamily(
            "jobq_oldest_xmin_age_transactions",
            "Transactions since the oldest snapshot, slot or prepared transaction holding back "
            "vacuum (0 if none).",
        )
        last = health.last_autovacuum
        dead.add_metric([], health.dead_tuples or 0)
        vacuumed.add_metric([], last.timestamp() if last is not None else 0)
        transaction.add_metric([], health.oldest_transaction_age_seconds or 0.0)
        xmin.add_metric([], health.oldest_xmin_age or 0)
        result += [dead, vacuumed, transaction, xmin]
    return result
