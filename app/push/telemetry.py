"""Prometheus series of push deliveries, counted by this process (as `app.core.metrics`'
counters are): each delivery by queue and outcome class, and its latency."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from app.core.metrics import HTTP_SECONDS_BUCKETS

DELIVERIES = Counter(
    "jobq_push_deliveries",
    "Deliveries to push targets, by queue and outcome (2xx..5xx, timeout, connection,"
    " refused, too_large).",
    ["queue", "outcome"],
)
DELIVERY_SECONDS = Histogram(
    "jobq_push_delivery_seconds",
    "A delivery's latency: the request's start to the answer's end.",
    ["queue"],
    buckets=HTTP_SECONDS_BUCKETS,
)


def delivered(queue: str, outcome: str, seconds: float) -> None:
    DELIVERIES.labels(queue, outcome).inc()
    DELIVERY_SECONDS.labels(queue).observe(seconds)
