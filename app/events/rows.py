"""Typed rows of the events' named SQL: fields are the statement's columns in order."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple
from uuid import UUID


class EventRow(NamedTuple):
    """An event as the stream and subscriptions send it."""

    position: int
    at: datetime
    kind: str
    queue: str
    job_id: int | None  # None: an event of the queue itself
    type: str | None
    attempt: int | None


class Bounds(NamedTuple):
    """The first and last positions kept; (None, None) before the first event."""

    first: int | None
    last: int | None


class SubscriptionRow(NamedTuple):
    """An event subscription: every column of `jobq.event_subscriptions`, in order."""

    name: str
    url: str
    queues: list[str] | None
    types: list[str] | None
    kinds: list[str] | None
    secrets: list[str]
    paused: bool
    position: int
    attempts: int
    next_attempt_at: datetime
    lease_id: UUID | None
    leased_until: datetime | None
    last_status: int | None
    last_error: str | None
    delivered_at: datetime | None
    created_at: datetime
    updated_at: datetime
    missed: int
