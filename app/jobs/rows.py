"""The rows the queue core's repository hands back: typed named tuples.

Named tuples, not frozen dataclasses: as immutable and as typed, and built from a
record in one C call (a lease pays it for every job). `JobRow` holds every column of
`jobq.jobs` in the table's order, so a record that is, or ends in, `j.*` becomes one by
position (a test compares the fields with the table).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from functools import partial
from typing import Any, Literal, NamedTuple, TypeVar, cast
from uuid import UUID

import asyncpg

# A job's state: the values of the `state` column (the enum `jobq.job_state`).
JobState = Literal["waiting", "queued", "running", "succeeded", "failed", "cancelled"]

# Each state's bit in a job's `unique_states` mask (jobq.unique_state_bit in SQL; a test
# holds the two to each other).
UNIQUE_STATE_BITS: dict[JobState, int] = {
    "waiting": 1, "queued": 2, "running": 4, "succeeded": 8, "failed": 16, "cancelled": 32,
}  # fmt: skip

# A job's `on_parent_failure` by its `run_on_parent_failure` column.
ON_PARENT_FAILURE = {True: "run", False: "cancel"}


class JobRow(NamedTuple):
    """One job as stored."""

    id: int
    queue: str
    type: str
    payload: Any
    priority: int
    state: JobState
    run_at: datetime
    attempt: int
    max_attempts: int
    lease_seconds: int
    lease_id: UUID | None
    lease_expires_at: datetime | None
    current_lease_seconds: int | None
    worker_id: str | None
    attempted_at: datetime | None
    cancel_requested: bool
    progress_percent: float | None
    progress_stage: str | None
    progress_message: str | None
    progress_updated_at: datetime | None
    result: Any
    last_error: dict[str, Any] | None
    attempts: list[dict[str, Any]]
    idempotency_key: str | None
    metadata: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    lease_key_id: int | None
    waiting_for: int
    has_parents: bool
    has_dependents: bool
    run_on_parent_failure: bool
    notify_finish: bool
    concurrency_key: str | None
    fairness_key: str | None
    unique_key: str | None
    unique_period: int | None
    unique_since: datetime | None  # the period's start; -infinity without a period
    unique_states: int | None  # a mask of UNIQUE_STATE_BITS
    timeout_seconds: int | None
    start_by: datetime | None
    snoozes: int
    traceparent: str | None  # the W3C trace context it was enqueued in
    tracestate: str | None

    @property
    def history(self) -> list[dict[str, Any]]:
        """Every ended attempt, as the API shows them (jobq.attempts_of in SQL).

        A succeeded job's last attempt is not in `attempts`: a complete writes no record,
        the job's own columns are it (migration 0016).
        """
        if self.state != "succeeded" or self.lease_id is None:
            return self.attempts
        last = {
            "attempt": self.attempt,
            "lease_id": str(self.lease_id),
            "worker_id": self.worker_id,
            "key_id": self.lease_key_id,
            "started_at": self.attempted_at,
            "finished_at": self.finished_at,
            "outcome": "succeeded",
            "error": None,
        }
        return [*self.attempts, last]

    @property
    def on_parent_failure(self) -> str:
        """What becomes of the job if a parent fails: `run` it anyway, or `cancel` it."""
        return ON_PARENT_FAILURE[self.run_on_parent_failure]


R = TypeVar("R", bound=tuple[Any, ...])


def builder(kind: type[R]) -> Callable[[Iterable[Any]], R]:
    """A named tuple of type `kind` from an iterable of exactly its values, in its order,
    in one C call. The class's own `__new__` and `_make` are Python calls (a lease or an
    ack call builds 100), and `_make`'s length check becomes a test's where records are
    read this way (tests/db/test_named_sql.py: each statement's columns are its row's)."""
    return cast(Callable[[Iterable[Any]], R], partial(tuple.__new__, kind))


def many(row: type[R], records: Iterable[asyncpg.Record]) -> list[R]:
    """Rows of type `row` from records of exactly its columns, in its order."""
    return list(map(builder(row), records))


def job_at(record: asyncpg.Record, start: int) -> JobRow:
    """The job in `record`'s columns from `start` on (a statement's `j.*` after others)."""
    return JobRow._make(record[start : start + len(JobRow._fields)])


class Enqueued(NamedTuple):
    """The job an enqueue created, or the one already holding its idempotency key or its
    uniqueness (`replaced`: its payload and run time are the enqueue's now)."""

    job: JobRow
    deduplicated: bool
    replaced: bool = False


class Refused(NamedTuple):
    """An enqueue refused by admission control: the queue holds `backlog` of `max_backlog`."""

    max_backlog: int
    backlog: int
    new_jobs: int = 1


class BatchItem(NamedTuple):
    """One job of a batch enqueue, in brief; `id` is None when its key changed hands."""

    ord: int
    id: int | None
    state: JobState | None
    deduplicated: bool
    replaced: bool = False


class LimitedState(NamedTuple):
    """What holds a limited queue back, read right after a lease that came back short."""

    max_running: int | None
    running: int
    rate_limit_jobs: int | None
    rate_used: int
    rate_frees_at: float | None  # epoch seconds: the window's oldest lease leaves it
    key_held: bool  # a due job waits because its key is at max_running_per_key
    key_rate_held: bool  # a due job waits because its fairness key is at its rate limit

    @property
    def reasons(self) -> list[str]:
        """The limits that are full now, by name."""
        found = []
        if self.max_running is not None and self.running >= self.max_running:
            found.append("max_running")
        if self.rate_limit_jobs is not None and self.rate_used >= self.rate_limit_jobs:
            found.append("rate_limit")
        if self.key_held:
            found.append("max_running_per_key")
        if self.key_rate_held:
            found.append("rate_limit_per_key")
        return found


class Beat(NamedTuple):
    """A heartbeat's effect: the lease's end, the cancel flag, and whether it was written."""

    written: bool
    lease_expires_at: datetime
    cancel_requested: bool


class FinishedBrief(NamedTuple):
    """A job a batch of acks finished: what the answer, the metrics and the spans need."""

    ord: int
    id: int
    queue: str
    state: JobState
    attempt: int
    attempted_at: datetime | None
    updated_at: datetime
    last_error: dict[str, Any] | None
    traceparent: str | None
    tracestate: str | None


class Parent(NamedTuple):
    """A parent of `child_id`, as that child's worker is handed it."""

    child_id: int
    id: int
    type: str
    state: JobState
    result: Any


class Dependency(NamedTuple):
    """A job at one `side` (`parent` or `child`) of another's dependencies."""

    side: str
    id: int
    queue: str
    type: str
    state: JobState


class ExplainRow(NamedTuple):
    """One job's facts against its queue's state now (`explain_job`)."""

    id: int
    queue: str
    type: str
    state: JobState
    priority: int
    run_at: datetime
    scheduled: bool  # run_at is still ahead
    attempt: int
    max_attempts: int
    finished_at: datetime | None
    last_error: Any
    cancel_requested: bool
    at: datetime  # the statement's now
    start_by: datetime | None
    snoozes: int
    parents_waiting: int
    parents: list[dict[str, Any]]  # the first unresolved parents: id, queue, type, state
    paused: bool
    ordering: str | None  # None: the queue has no settings row
    max_running: int | None
    running: int | None  # counted when max_running is set
    max_running_per_key: int | None
    concurrency_key: str | None
    key_running: int | None  # counted when the key is limited
    rate_limit_jobs: int | None
    rate_used: int
    rate_frees_at: datetime | None
    fairness_key: str | None
    key_rate_limit_jobs: int | None
    key_rate_used: int
    key_rate_frees_at: datetime | None
    ahead: int  # due jobs a lease takes first, at most max_ahead + 1
    higher_priority: int  # of them, of higher priority
    type_leased_at: datetime | None
    queue_leased_at: datetime | None
    push_host: str | None  # the queue is pushed to this host (its target's URL)
    push_held_until: datetime | None  # its target's breaker is open until then
