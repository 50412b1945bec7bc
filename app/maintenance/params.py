"""The parameters of the maintenance statements (`queries.sql`): a NamedTuple per
statement, its fields the statement's `:names` (see `app.db.statement`)."""

from __future__ import annotations

from typing import NamedTuple


class ReapExpiredParams(NamedTuple):
    batch_size: int
    skip_ids: list[int]  # jobs a batch before failed to reap
    only_id: int | None  # that job's lease alone; None: any
    backoff_base: float
    backoff_cap: float
    backoff_jitter: float


class ExpireUnstartedParams(NamedTuple):
    batch_size: int


class ExpiredLeasesParams(NamedTuple):
    batch_size: int
    skip_ids: list[int]


class PruneFinishedParams(NamedTuple):
    batch_size: int
    succeeded_age: float | None  # seconds the service keeps a succeeded job; None: for ever
    failed_age: float | None  # ... and a failed or cancelled one (a queue's own ages first)
    skip_ids: list[int]  # jobs a batch before failed to delete
    only_id: int | None  # that job alone; None: any


class TablesToVacuumParams(NamedTuple):
    min_dead: int
    fraction: float  # of the live rows, dead on top of `min_dead`


class FoldStatDeltasParams(NamedTuple):
    batch_size: int


class PruneQueueMinutesParams(NamedTuple):
    batch_size: int
    retain_seconds: float  # how long a minute's rollup is kept
