"""The parameters of the events' named SQL (`queries.sql`): a NamedTuple per statement,
its fields the statement's `:names` (see `app.db.statement`)."""

from __future__ import annotations

from typing import NamedTuple


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
