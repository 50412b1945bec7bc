"""Push targets as the API shows them."""

from __future__ import annotations

from typing import Any

from app.push.service.health import PushHealth
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
