"""What a producer asks to enqueue, as the enqueue service takes it: a job's fields with
its shape checked (types and ranges) but not yet held to this service's limits (payload
size, JSON depth, longest lease), which `Enqueuer` applies and locates in these fields."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple


class ItemRef(NamedTuple):
    """An earlier item of the same batch, by its place in the batch (from 0)."""

    ref: int


Parent = int | ItemRef  # a job's id, or an earlier item of its batch


class Unique(NamedTuple):
    """A job's `unique` options: one job of its type in the queue per `key`, per `period`
    seconds (None: none), while in `states` (None: the database's default)."""

    key: str
    period: int | None
    states: Sequence[str] | None
    on_conflict: Literal["return_existing", "replace"]

    def options(self) -> dict[str, Any]:
        """As `jobq.insert_jobs` and `jobq.enqueue_many` take them (None left out)."""
        return {name: value for name, value in self._asdict().items() if value is not None}


class Trace(NamedTuple):
    """A W3C trace context, checked: the producer's span the job continues."""

    traceparent: str
    tracestate: str | None = None


class JobSpec(NamedTuple):
    """A job to enqueue: JSON as values; None where it says nothing (the queue's settings
    or the service's defaults apply). It waits for the jobs `depends_on` names (None or
    empty: none) and `on_parent_failure` says what a parent's failure does to it.

    A NamedTuple rather than a dataclass: the route builds one per job enqueued."""

    type: str
    payload: Any
    priority: int
    run_at: datetime | None
    delay_seconds: float | None
    max_attempts: int | None
    lease_seconds: int | None
    idempotency_key: str | None
    metadata: dict[str, Any]
    depends_on: Sequence[Parent] | None
    on_parent_failure: Literal["cancel", "run"]
    concurrency_key: str | None
    fairness_key: str | None
    unique: Unique | None = None
    timeout_seconds: int | None = None
    start_by: datetime | None = None
    trace: Trace | None = None
