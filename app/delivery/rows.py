"""The rows the delivery's named SQL answers."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class BreakerRow(NamedTuple):
    """A target's circuit breaker, as `jobq.delivery_breakers` holds it."""

    target: str
    failures: int  # consecutive failed deliveries
    trips: int  # times it opened since the last success (each pause doubles)
    open_until: datetime | None  # deliveries wait until then; None or past: closed
    failed_at: datetime | None
    last_error: str | None  # what the last failure was (a status class and excerpt)
