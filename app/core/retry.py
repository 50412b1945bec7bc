"""The retry policy: how long a failed attempt waits before the next."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.config import Settings


@dataclass(frozen=True, slots=True)
class Backoff:
    """base * 2^(attempt-1) seconds, capped at `cap_seconds`, then ±`jitter` (a fraction).

    The database computes it (`jobq.retry_at`); these are its parameters.
    """

    base_seconds: float
    cap_seconds: float
    jitter: float

    @classmethod
    def from_settings(cls, settings: Settings) -> Backoff:
        return cls(
            base_seconds=settings.backoff_base_seconds,
            cap_seconds=settings.backoff_cap_seconds,
            jitter=settings.backoff_jitter,
        )
