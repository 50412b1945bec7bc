"""Deliveries counted in memory, by queue and minute, until the dispatcher writes them
to `jobq.push_minutes` (every `push_stats_flush_seconds`, one statement for all): the
statistics every replica reads, with no statement per delivery."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pydantic_core

from app.delivery import Attempt
from app.push.params import AddPushMinutesParams

RETRY_LATER = frozenset({429, 503})
MAX_BUCKET = 60


def outcome_class(attempt: Attempt) -> str:
    """A delivery's class in the statistics: `2xx` (not 202), `202`, `retry_later` (429,
    503), `4xx`, `5xx`, or what failed without an answer (`timeout`, `connection`,
    `refused`, `too_large`)."""
    if attempt.failure is not None or attempt.status is None:
        return attempt.status_class
    if attempt.status == 202:
        return "202"
    if attempt.status in RETRY_LATER:
        return "retry_later"
    return attempt.status_class


def duration_bucket(seconds: float) -> int:
    """`jobq.duration_bucket` (migration 0025): half powers of two from a millisecond
    (tests/db/test_push_stats.py holds the two to each other)."""
    if seconds < 0.001:
        return 0
    return min(MAX_BUCKET, 1 + math.floor(2 * math.log(seconds * 1000) / math.log(2)))


@dataclass(slots=True)
class _Minute:
    deliveries: int = 0
    classes: Counter[str] = field(default_factory=Counter)
    buckets: Counter[int] = field(default_factory=Counter)


class Tally:
    """This replica's deliveries not written yet."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._minutes: dict[tuple[str, int], _Minute] = {}

    def __len__(self) -> int:
        return len(self._minutes)

    def count(self, queue: str, attempt: Attempt) -> None:
        minute = int(self._clock() // 60) * 60
        row = self._minutes.get((queue, minute))
        if row is None:
            row = self._minutes[queue, minute] = _Minute()
        row.deliveries += 1
        row.classes[outcome_class(attempt)] += 1
        row.buckets[duration_bucket(attempt.seconds)] += 1

    def take(self) -> AddPushMinutesParams | None:
        """What was counted, as `add_push_minutes`' parameters (None: nothing); the
        tally starts again from zero."""
        if not self._minutes:
            return None
        taken, self._minutes = self._minutes, {}
        return _params(taken)

    def give_back(self, params: AddPushMinutesParams) -> None:
        """Count again what `take` handed out but could not be written."""
        for queue, minute, deliveries, classes, buckets in zip(*params, strict=True):
            row = self._minutes.get((queue, int(minute.timestamp())))
            if row is None:
                row = self._minutes[queue, int(minute.timestamp())] = _Minute()
            row.deliveries += deliveries
            row.classes.update(pydantic_core.from_json(classes))
            row.buckets.update({int(k): v for k, v in pydantic_core.from_json(buckets).items()})


def _params(minutes: dict[tuple[str, int], _Minute]) -> AddPushMinutesParams:
    keys = sorted(minutes)
    rows = [minutes[k] for k in keys]
    return AddPushMinutesParams(
        queues=[queue for queue, _ in keys],
        minutes=[datetime.fromtimestamp(minute, UTC) for _, minute in keys],
        deliveries=[r.deliveries for r in rows],
        classes=[pydantic_core.to_json(dict(r.classes)).decode() for r in rows],
        latency_buckets=[
            pydantic_core.to_json({str(k): v for k, v in r.buckets.items()}).decode() for r in rows
        ],
    )
