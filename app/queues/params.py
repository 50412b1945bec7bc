"""The parameters of the queues' named SQL (`queries.sql`): a NamedTuple per statement,
its fields the statement's `:names` (see `app.db.statement`). Statements of one shape
share it (`ByQueue`)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class ByQueue(NamedTuple):
    queue: str


class ByQueueOrAll(NamedTuple):
    queue: str | None  # None: every queue


class RedriveFailedParams(NamedTuple):
    """Which failed jobs of a queue go back to it: each filter None is no filter."""

    queue: str
    type: str | None
    error_type: str | None
    failed_since: datetime | None
    limit: int
    reset_attempts: bool


class PurgeQueuedParams(NamedTuple):
    queue: str
    batch_size: int
    up_to: int | None  # the highest id to delete; None: the highest now


class SetQueueSettingsParams(NamedTuple):
    """A queue's settings: those named in `given` are set (to NULL: cleared), the others
    kept (on a new row, NULL). `given` names the rate limits' two columns `rate_limit`
    and `rate_limit_per_key`, and aging's `aging`."""

    queue: str
    max_backlog: int | None
    max_running: int | None
    max_running_per_key: int | None
    rate_limit_jobs: int | None
    rate_limit_seconds: float | None
    max_attempts: int | None
    lease_seconds: int | None
    backoff_base_seconds: float | None
    backoff_cap_seconds: float | None
    backoff_jitter: float | None
    retain_succeeded_seconds: float | None
    retain_failed_seconds: float | None
    ordering: str | None
    fair_weights: str | None  # a JSON object, as text
    rate_limit_per_key_jobs: int | None
    rate_limit_per_key_seconds: float | None
    aging_seconds: float | None
    aging_max: int | None
    timeout_seconds: int | None
    given: list[str]


class FailedGroupsParams(NamedTuple):
    queue: str
    limit: int


class QueueSeriesParams(NamedTuple):
    queue: str
    minutes: int
    step_minutes: int


class RunningJobsParams(NamedTuple):
    queue: str | None  # None: every queue
    per_queue: int


class BusiestFairKeysParams(NamedTuple):
    queue: str
    count_up_to: int  # each key's queued jobs are counted up to this many
    keys: int


class UnservedTypesParams(NamedTuple):
    queue: str
    head: int  # due jobs looked at, oldest first
    idle_seconds: float
