"""Push targets as the API shows them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from app.push.service.health import PushDeliveries, PushHealth
from app.push.service.targets import PushTarget


def target(found: PushTarget | None) -> dict[str, Any] | None:
    """`PushTargetOut`, or None for a pulled queue."""
    if found is None:
        return None
    return {
        "url": found.url,
        "header_names": sorted(found.headers),
        "timeout_seconds": found.timeout_seconds,
        "secret_fingerprints": found.secrets.fingerprints(),
    }


def health(found: PushHealth) -> dict[str, Any]:
    """`PushHealthOut`."""
    breaker = found.breaker
    return {
        "queue": found.target.queue,
        "target": target(found.target),
        "breaker": {
            "state": breaker.state,
            "failures": breaker.failures,
            "trips": breaker.trips,
            "open_until": breaker.open_until,
            "failed_at": breaker.failed_at,
            "last_error": breaker.last_error,
        },
    }


# every outcome class, shown with its count even when nothing had it
CLASSES = (
    "2xx",
    "202",
    "retry_later",
    "4xx",
    "5xx",
    "timeout",
    "connection",
    "refused",
    "too_large",
)


def _window(
    deliveries: int, classes: dict[str, int], latency: list[float] | None
) -> dict[str, Any]:
    p50, p95 = latency if latency is not None else (None, None)
    return {
        "deliveries": deliveries,
        "classes": {name: 0 for name in CLASSES} | classes,
        "latency_seconds": {"p50": p50, "p95": p95},
    }


def deliveries(found: PushDeliveries | None) -> dict[str, Any] | None:
    """`PushDeliveriesOut` (the target's host only: no path, header or secret), or None
    for a pulled queue."""
    if found is None:
        return None
    stats = found.stats
    return {
        "target_host": urlsplit(found.target.url).hostname or "",
        "last_minute": _window(stats.deliveries_1m, stats.classes_1m, stats.latency_1m),
        "last_hour": _window(stats.deliveries_1h, stats.classes_1h, stats.latency_1h),
        "breaker": {"state": found.breaker.state, "open_until": found.breaker.open_until},
    }
