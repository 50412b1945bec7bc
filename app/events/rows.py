"""Typed rows of the events' named SQL: fields are the statement's columns in order."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


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
