"""Runs the push targets' named SQL (`queries.sql`) and hands back typed rows."""

from __future__ import annotations

from pathlib import Path

from app.db.database import Database
from app.db.statement import NO_PARAMS, NoParams, Queries
from app.push.params import (
    AddPushMinutesParams,
    ByQueue,
    KeepSecretsParams,
    PushStatsParams,
    SetPushTargetParams,
)
from app.push.rows import PushStatsRow, PushTargetRow

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
GET_PUSH_TARGET = QUERIES.bind("get_push_target", ByQueue)
PUSH_TARGETS = QUERIES.bind("push_targets", NoParams)
SET_PUSH_TARGET = QUERIES.bind("set_push_target", SetPushTargetParams)
SET_PUSH_TARGET_KEEPING_SECRETS = QUERIES.bind("set_push_target_keeping_secrets", KeepSecretsParams)
CLEAR_PUSH_TARGET = QUERIES.bind("clear_push_target", ByQueue)
ADD_PUSH_MINUTES = QUERIES.bind("add_push_minutes", AddPushMinutesParams)
PUSH_STATS = QUERIES.bind("push_stats", PushStatsParams)


class PushRepository:
    """The pushed queues' targets and their delivery statistics."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, queue: str) -> PushTargetRow | None:
        record = await self._db.fetch_one(GET_PUSH_TARGET, ByQueue(queue))
        return None if record is None else PushTargetRow(*record)

    async def all(self) -> list[PushTargetRow]:
        return [PushTargetRow(*r) for r in await self._db.fetch(PUSH_TARGETS, NO_PARAMS)]

    async def set(self, params: SetPushTargetParams) -> PushTargetRow:
        record = await self._db.fetch_one(SET_PUSH_TARGET, params)
        assert record is not None  # an upsert answers its row
        return PushTargetRow(*record)

    async def set_keeping_secrets(self, params: KeepSecretsParams) -> PushTargetRow | None:
        """None: the queue has no target (whose secrets could be kept)."""
        record = await self._db.fetch_one(SET_PUSH_TARGET_KEEPING_SECRETS, params)
        return None if record is None else PushTargetRow(*record)

    async def clear(self, queue: str) -> bool:
        """Whether the queue was pushed."""
        return bool(await self._db.fetch(CLEAR_PUSH_TARGET, ByQueue(queue)))

    async def add_minutes(self, params: AddPushMinutesParams) -> int:
        """Add counted deliveries to their minutes; how many rows were written."""
        record = await self._db.fetch_one(ADD_PUSH_MINUTES, params)
        assert record is not None  # a count answers one row
        return int(record["added"])

    async def stats(self, queue: str | None) -> list[PushStatsRow]:
        """The pushed queues' (one, or every one) deliveries of the last minute and hour."""
        records = await self._db.fetch(PUSH_STATS, PushStatsParams(queue))
        return [PushStatsRow(*r) for r in records]
