"""The event stream's shapes: an event as `GET /v1/events` sends it (the `data` of each
Server-Sent Event) and subscriptions post it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter

from app.api.types import Name

EventKind = Literal[
    "enqueued",
    "started",
    "succeeded",
    "failed",
    "retrying",
    "cancelled",
    "queue_paused",
    "queue_resumed",
    "queue_settings",
]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)
MAX_FILTER_VALUES = 50  # queues, types or kinds one stream may name


class EventOut(BaseModel):
    """A job's state change, or a change of a queue (its `job_id`, `type` and `attempt`
    are then null)."""

    id: int = Field(
        description="The event's position: events are numbered in the order they were "
        "committed, without gaps; resume after it with `Last-Event-ID`."
    )
    kind: EventKind = Field(
        description="What happened: a job `enqueued`, `started` (leased), `succeeded`, "
        "`failed` (for good), `retrying` (queued again after an attempt, or retried by an "
        "operator) or `cancelled`; a queue paused, resumed, or its settings changed."
    )
    at: datetime = Field(description="When the change's transaction began.")
    queue: str
    job_id: int | None = Field(description="The job's id; null for a queue's event.")
    type: str | None = Field(description="The job's type; null for a queue's event.")
    attempt: int | None = Field(
        description="The job's attempt (0 before its first lease); null for a queue's event."
    )


EVENT = TypeAdapter(EventOut)


class SubscriptionIn(BaseModel):
    """An event subscription: where to send which events."""

    model_config = ConfigDict(extra="forbid")

    url: Annotated[str, StringConstraints(min_length=1, max_length=2048)] = Field(
        description="Where the events are POSTed: allowed by JOBQ_PUSH_ALLOWED_TARGETS."
    )
    queues: list[Name] | None = Field(
        default=None, max_length=MAX_FILTER_VALUES, description="Only these queues (null: all)."
    )
    types: list[Name] | None = Field(
        default=None, max_length=MAX_FILTER_VALUES, description="Only jobs of these types."
    )
    kinds: list[EventKind] | None = Field(
        default=None, max_length=len(EVENT_KINDS), description="Only these kinds of events."
    )
    secrets: list[Annotated[str, StringConstraints(max_length=200)]] | None = Field(
        default=None,
        min_length=1,
        max_length=2,
        description="Standard Webhooks secrets (`whsec_…`), the newest first; two while "
        "rotating. Null: a new subscription gets one made for it (answered once), a "
        "replaced one keeps its own.",
    )
    paused: bool = Field(default=False, strict=True)


class BreakerOut(BaseModel):
    state: Literal["closed", "open", "half_open"]
    failures: int = Field(description="Consecutive failed deliveries.")
    open_until: datetime | None = Field(description="Deliveries wait until then.")
    last_error: str | None


class SubscriptionOut(BaseModel):
    name: str
    url: str
    queues: list[str] | None
    types: list[str] | None
    kinds: list[EventKind] | None
    paused: bool
    secret_fingerprints: list[str] = Field(
        description="The first hex digits of each secret's SHA-256 (secrets are never shown)."
    )
    secret: str | None = Field(
        default=None, description="The secret made for a new subscription: shown this once."
    )
    position: int = Field(description="The last event position delivered.")
    attempts: int = Field(description="Failed tries of the next batch.")
    next_attempt_at: datetime
    last_status: int | None = Field(description="The HTTP status of the last delivery.")
    last_error: str | None
    delivered_at: datetime | None
    missed: int = Field(
        description="Events that expired from the outbox (JOBQ_EVENT_RETENTION_SECONDS, "
        "which no subscription holds back) before this one received them: a gap in what "
        "it got."
    )
    breaker: BreakerOut
    created_at: datetime
    updated_at: datetime


class SubscriptionsOut(BaseModel):
    subscriptions: list[SubscriptionOut]
