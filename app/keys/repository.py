"""Runs the keys' named SQL (`queries.sql`) and hands back typed rows. Knows no rules."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.db.database import Database
from app.db.statement import NO_PARAMS, NoParams, Queries
from app.keys.params import ByKeyId, ByLookupId, ByName, CreateKeyParams
from app.keys.rows import KeyRow

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
CREATE_KEY = QUERIES.bind("create_key", CreateKeyParams)
REVOKE_KEY = QUERIES.bind("revoke_key", ByName)
GET_KEY = QUERIES.bind("get_key", ByLookupId)
GET_KEY_BY_NAME = QUERIES.bind("get_key_by_name", ByName)
LIST_KEYS = QUERIES.bind("list_keys", NoParams)
ANY_KEY = QUERIES.bind("any_key", NoParams)
TOUCH_KEY = QUERIES.bind("touch_key", ByKeyId)


class KeysRepository:
    """The API keys table, one method per named statement."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self,
        *,
        name: str,
        lookup_id: str,
        secret_hash: bytes,
        scopes: Sequence[str],
        queues: Sequence[str] | None,
    ) -> KeyRow | None:
        """The new key's row; None when the name or the lookup id is taken."""
        params = CreateKeyParams(
            name=name, lookup_id=lookup_id, secret_hash=secret_hash, scopes=scopes, queues=queues
        )
        record = await self._db.fetch_one(CREATE_KEY, params)
        return None if record is None else KeyRow._make(record)

    async def revoke(self, name: str) -> KeyRow | None:
        record = await self._db.fetch_one(REVOKE_KEY, ByName(name))
        return None if record is None else KeyRow._make(record)

    async def get(self, lookup_id: str) -> KeyRow | None:
        record = await self._db.fetch_one(GET_KEY, ByLookupId(lookup_id))
        return None if record is None else KeyRow._make(record)

    async def get_by_name(self, name: str) -> KeyRow | None:
        record = await self._db.fetch_one(GET_KEY_BY_NAME, ByName(name))
        return None if record is None else KeyRow._make(record)

    async def list(self) -> list[KeyRow]:
        return [KeyRow._make(record) for record in await self._db.fetch(LIST_KEYS, NO_PARAMS)]

    async def any(self) -> bool:
        record = await self._db.fetch_one(ANY_KEY, NO_PARAMS)
        assert record is not None
        return bool(record[0])

    async def touch(self, key_id: int) -> None:
        await self._db.fetch(TOUCH_KEY, ByKeyId(key_id))
