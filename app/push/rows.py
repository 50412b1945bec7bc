"""The rows the push targets' named SQL answers."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class PushTargetRow(NamedTuple):
    """A pushed queue's target as `jobq.push_targets` holds it."""

    queue: str
    url: str
    headers: dict[str, str]
    timeout_seconds: float
    secrets: list[str]
    updated_at: datetime


class PushStatsRow(NamedTuple):
    """A pushed queue's deliveries over the last minute and hour (`push_stats`)."""

    queue: str
    deliveries_1m: int
    deliveries_1h: int
    classes_1m: dict[str, int]
    classes_1h: dict[str, int]
    latency_1m: list[float] | None  # [p50, p95] in seconds; None: no delivery
    latency_1h: list[float] | None
