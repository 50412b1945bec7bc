"""The rows the maintenance repository hands back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Generic, NamedTuple, TypeVar

from app.jobs import JobState

T = TypeVar("T")


class Reaped(NamedTuple):
    """A job whose lease expired, as the reaper left it."""

    id: int
    queue: str
    state: JobState
    attempt: int
    run_at: datetime


class Expired(NamedTuple):
    """A job not leased by its start deadline, now cancelled."""

    id: int
    queue: str


class DeadRows(NamedTuple):
    """A table autovacuum leaves alone, and its dead rows (PostgreSQL's estimate)."""

    name: str
    dead: int


@dataclass(frozen=True, slots=True)
class LeaderBatch(Generic[T]):
    """Rows a maintenance statement changed, and when (database clock, epoch seconds) the
    lock was held: from when it was taken until after the statement, before commit."""

    rows: list[T]
    started: float
    ended: float
