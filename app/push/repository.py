"""Runs the push targets' named SQL (`queries.sql`) and hands back typed rows."""

from __future__ import annotations

from pathlib import Path

from app.db.database import Database
from app.db.statement import NO_PARAMS, NoParams, Queries
from app.push.params import ByQueue, KeepSecretsParams, SetPushTargetParams
from app.push.rows import PushTargetRow

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
GET_PUSH_TARGET = QUERIES.bind("get_push_target", ByQueue)
PUSH_TARGETS = QUERIES.bind("push_targets", NoParams)
SET_PUSH_TARGET = QUERIES.bind("set_push_target", SetPushTargetParams)
SET_PUSH_TARGET_KEEPING_SECRETS = QUERIES.bind("set_push_target_keeping_secrets", KeepSecretsParams)
CLEAR_PUSH_TARGET = QUERIES.bind("clear_push_target", ByQueue)


class PushRepository:
    """The pushed queues' targets."""

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
