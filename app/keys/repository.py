"""Runs the keys' named SQL (`queries.sql`) and hands back typed rows. Knows no rules."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.db.database import Database
from app.db.statement import Queries
from app.keys.rows import KeyRow

QUERIES = Queries(Path(__file__).with_name("queries.sql"))
CREATE_KEY = QUERIES["create_key"]
REVOKE_KEY = QUERIES["revoke_key"]
GET_KEY = QUERIES["get_key"]
GET_KEY_BY_NAME = QUERIES["get_key_by_name"]
LIST_KEYS = QUERIES["list_keys"]
ANY_KEY = QUERIES["any_key"]
TOUCH_KEY = QUERIES["touch_key"]


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
        record = await self._db.fetch_one(
            CREATE_KEY,
            {
                "name": name,
                "lookup_id": lookup_id,
                "secret_hash": secret_hash,
                "scopes": scopes,
                "queues": queues,
            },
        )
        return None if record is None else KeyRow._make(record)

    async def revoke(self, name: str) -> KeyRow | None:
        record = await self._db.fetch_one(REVOKE_KEY, {"name": name})
        return None if record is None else KeyRow._make(record)

    async def get(self, lookup_id: str) -> KeyRow | None:
        record = await self._db.fetch_one(GET_KEY, {"lookup_id": lookup_id})
        return None if record is None else KeyRow._make(record)

    async def get_by_name(self, name: str) -> KeyRow | None:
        record = await self._db.fetch_one(GET_KEY_BY_NAME, {"name": name})
        return None if record is None else KeyRow._make(record)

    async def list(self) -> list[KeyRow]:
        return [KeyRow._make(record) for record in await self._db.fetch(LIST_KEYS, {})]

    async def any(self) -> bool:
        record = await self._db.fetch_one(ANY_KEY, {})
        assert record is not None
        return bool(record[0])

    async def touch(self, key_id: int) -> None:
        await self._db.fetch(TOUCH_KEY, {"key_id": key_id})
