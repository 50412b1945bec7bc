"""The parameters of the keys' named SQL (`queries.sql`): a NamedTuple per statement, its
fields the statement's `:names` (see `app.db.statement`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class ByName(NamedTuple):
    name: str


class ByLookupId(NamedTuple):
    lookup_id: str


class ByKeyId(NamedTuple):
    key_id: int


class CreateKeyParams(NamedTuple):
    name: str
    lookup_id: str
    secret_hash: bytes  # the key's SHA-256 digest: never the key
    scopes: Sequence[str]
    queues: Sequence[str] | None  # None: every queue
