"""The parameters of the push targets' named SQL (`queries.sql`; see `app.db.statement`)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class ByQueue(NamedTuple):
    queue: str


class SetPushTargetParams(NamedTuple):
    queue: str
    url: str
    headers: str  # a JSON object, as text
    timeout_seconds: float
    secrets: list[str]


class KeepSecretsParams(NamedTuple):
    """`set_push_target_keeping_secrets`: the target's fields but its secrets."""

    queue: str
    url: str
    headers: str
    timeout_seconds: float


class AddPushMinutesParams(NamedTuple):
    """`add_push_minutes`: one replica's counts, one element per queue and minute (the
    histograms as JSON objects, as text)."""

    queues: list[str]
    minutes: list[datetime]
    deliveries: list[int]
    classes: list[str]
    latency_buckets: list[str]


class PushStatsParams(NamedTuple):
    queue: str | None  # None: every pushed queue
