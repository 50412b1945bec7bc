"""The parameters of the delivery's named SQL (`queries.sql`; see `app.db.statement`)."""

from __future__ import annotations

from typing import NamedTuple


class ByTarget(NamedTuple):
    target: str


class ByTargets(NamedTuple):
    targets: list[str]


class BreakerFailedParams(NamedTuple):
    target: str
    error: str
    threshold: int
    pause_seconds: float
    max_pause_seconds: float
