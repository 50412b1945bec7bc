"""The event stream's shapes: an event as `GET /v1/events` sends it (the `data` of each
Server-Sent Event) and subscriptions post it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, Field, TypeAdapter

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
