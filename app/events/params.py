"""The parameters of the events' named SQL (`queries.sql`): a NamedTuple per statement,
its fields the statement's `:names` (see `app.db.statement`)."""

from __future__ import annotations

from typing import NamedTuple
from uuid import UUID


class StampEventsParams(NamedTuple):
    batch_size: int


class EventsBetweenParams(NamedTuple):
    after: int  # the last position the reader has
    up_to: int  # the last position to read (at most the last stamped)
    allowed_names: list[str] | None  # None, None: every queue
    allowed_patterns: list[str] | None
    queues: list[str] | None  # None: every queue allowed
    types: list[str] | None  # None: every job type (and the queues' own events)
    kinds: list[str] | None  # None: every kind


class PruneEventsParams(NamedTuple):
    batch_size: int
    retain_seconds: float


class PutSubscriptionParams(NamedTuple):
    name: str
    url: str
    queues: list[str] | None  # None: every queue
    types: list[str] | None
    kinds: list[str] | None
    secrets: list[str] | None  # None: the new secret (created), or those kept (replaced)
    new_secret: str
    paused: bool


class ByName(NamedTuple):
    name: str


class ClaimSubscriptionParams(NamedTuple):
    lease_id: UUID
    lease_seconds: float


class AdvanceSubscriptionParams(NamedTuple):
    name: str
    lease_id: UUID
    position: int
    status: int | None  # None: nothing was sent


class SkipExpiredParams(NamedTuple):
    name: str
    lease_id: UUID
    position: int  # the last expired event: the cursor moves to it


class RetrySubscriptionParams(NamedTuple):
    name: str
    lease_id: UUID
    delay_seconds: float
    attempted: bool
    status: int | None
    error: str | None
