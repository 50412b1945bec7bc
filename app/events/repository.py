"""Runs the events' named SQL (`queries.sql`) and hands back typed rows. Knows no rules."""

from __future__ import annotations

from pathlib import Path

from app.db.database import Database, fetch_in
from app.db.leader import as_leader
from app.db.statement import NO_PARAMS, NoParams, Queries
from app.events.params import (
    AdvanceSubscriptionParams,
    ByName,
    ClaimSubscriptionParams,
    EventsBetweenParams,
    PruneEventsParams,
    PutSubscriptionParams,
    RetrySubscriptionParams,
    SkipExpiredParams,
    StampEventsParams,
)
from app.events.rows import Bounds, EventRow, SubscriptionRow

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
STAMP_EVENTS = QUERIES.bind("stamp_events", StampEventsParams)
EVENT_BOUNDS = QUERIES.bind("event_bounds", NoParams)
EVENTS_BETWEEN = QUERIES.bind("events_between", EventsBetweenParams)
PRUNE_EVENTS = QUERIES.bind("prune_events", PruneEventsParams)
PUT_SUBSCRIPTION = QUERIES.bind("put_subscription", PutSubscriptionParams)
GET_SUBSCRIPTION = QUERIES.bind("get_subscription", ByName)
LIST_SUBSCRIPTIONS = QUERIES.bind("list_subscriptions", NoParams)
DELETE_SUBSCRIPTION = QUERIES.bind("delete_subscription", ByName)
CLAIM_SUBSCRIPTION = QUERIES.bind("claim_subscription", ClaimSubscriptionParams)
ADVANCE_SUBSCRIPTION = QUERIES.bind("advance_subscription", AdvanceSubscriptionParams)
RETRY_SUBSCRIPTION = QUERIES.bind("retry_subscription", RetrySubscriptionParams)
SKIP_EXPIRED_EVENTS = QUERIES.bind("skip_expired_events", SkipExpiredParams)


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


class SubscriptionsRepository:
    """The event subscriptions table, one method per named statement."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, params: PutSubscriptionParams) -> tuple[SubscriptionRow, bool]:
        """The subscription as stored, and whether it was created (not replaced)."""
        record = await self._db.fetch_one(PUT_SUBSCRIPTION, params)
        assert record is not None
        return SubscriptionRow._make(record[1:]), bool(record["created"])

    async def get(self, name: str) -> SubscriptionRow | None:
        record = await self._db.fetch_one(GET_SUBSCRIPTION, ByName(name))
        return None if record is None else SubscriptionRow._make(record)

    async def all(self) -> list[SubscriptionRow]:
        records = await self._db.fetch(LIST_SUBSCRIPTIONS, NO_PARAMS)
        return [SubscriptionRow._make(r) for r in records]

    async def delete(self, name: str) -> bool:
        return await self._db.fetch_one(DELETE_SUBSCRIPTION, ByName(name)) is not None

    async def claim(self, params: ClaimSubscriptionParams) -> SubscriptionRow | None:
        record = await self._db.fetch_one(CLAIM_SUBSCRIPTION, params)
        return None if record is None else SubscriptionRow._make(record)

    async def advance(self, params: AdvanceSubscriptionParams) -> bool:
        """False when the lease was lost (another dispatcher took the subscription over)."""
        return await self._db.fetch_one(ADVANCE_SUBSCRIPTION, params) is not None

    async def skip_expired(self, params: SkipExpiredParams) -> int | None:
        """The subscription's missed events in all; None when the lease was lost."""
        record = await self._db.fetch_one(SKIP_EXPIRED_EVENTS, params)
        return None if record is None else int(record["missed"])

    async def retry(self, params: RetrySubscriptionParams) -> bool:
        return await self._db.fetch_one(RETRY_SUBSCRIPTION, params) is not None
