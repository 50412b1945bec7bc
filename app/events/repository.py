"""Runs the events' named SQL (`queries.sql`) and hands back typed rows. Knows no rules."""

from __future__ import annotations

from pathlib import Path

from app.db.database import Database, fetch_in
from app.db.leader import as_leader
from app.db.statement import NO_PARAMS, NoParams, Queries
from app.events.params import EventsBetweenParams, PruneEventsParams, StampEventsParams
from app.events.rows import Bounds, EventRow

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
STAMP_EVENTS = QUERIES.bind("stamp_events", StampEventsParams)
EVENT_BOUNDS = QUERIES.bind("event_bounds", NoParams)
EVENTS_BETWEEN = QUERIES.bind("events_between", EventsBetweenParams)
PRUNE_EVENTS = QUERIES.bind("prune_events", PruneEventsParams)


class EventsRepository:
    """The job-event outbox, one method per named statement."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def stamp(self, batch_size: int) -> int | None:
        """How many events were given positions; None when another session stamps."""
        record = await self._db.fetch_one(STAMP_EVENTS, StampEventsParams(batch_size))
        assert record is not None
        stamped: int | None = record["stamped"]
        return stamped

    async def bounds(self) -> Bounds:
        record = await self._db.fetch_one(EVENT_BOUNDS, NO_PARAMS)
        assert record is not None
        return Bounds._make(record)

    async def between(self, params: EventsBetweenParams) -> list[EventRow]:
        return [EventRow._make(r) for r in await self._db.fetch(EVENTS_BETWEEN, params)]

    async def prune_batch(self, batch_size: int, retain_seconds: float) -> int | None:
        """Events deleted, as the maintenance leader; None when another replica leads."""
        async with as_leader(self._db) as leading:
            if leading is None:
                return None
            params = PruneEventsParams(batch_size=batch_size, retain_seconds=retain_seconds)
            (record,) = await fetch_in(leading[0], PRUNE_EVENTS, params)
            return int(record["pruned"])
